"""Real Postgres for every test: a fresh database per test (see tests/databases.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.databases import fresh_database, migrated_template, resolve_server_url


@pytest.fixture(scope="session")
def server_url() -> str:
    return resolve_server_url()


@pytest.fixture(scope="session")
async def template_name(server_url: str) -> AsyncIterator[str]:
    async with migrated_template(server_url) as name:
        yield name


@pytest.fixture
async def database_url(server_url: str, template_name: str) -> AsyncIterator[str]:
    async with fresh_database(server_url, template_name) as url:
        yield url
