"""A migrated template for the security tests, besides the session's: one migrated as a real
Supabase project is, under its default privileges (tests/databases.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.databases import migrated_template


@pytest.fixture(scope="session")
async def supabase_template_name(server_url: str) -> AsyncIterator[str]:
    async with migrated_template(server_url, supabase=True) as name:
        yield name
