"""Real Postgres for every test: DATABASE_URL's server, else an embedded one.

Each test gets a fresh database cloned from a migrated template, so tests never see each
other's rows and cloning costs milliseconds rather than a migration run.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from infra.embedded_pg import start_embedded_postgres
from infra.migrate import migrate
from infra.settings import Settings


def with_database(url: str, name: str) -> str:
    return make_conninfo(url, dbname=name)


@pytest.fixture(scope="session")
def server_url() -> str:
    url = Settings().database_url
    if url:
        return url
    data_dir = Path(tempfile.gettempdir()) / f"handoff-test-pg-{os.getuid()}"
    return start_embedded_postgres(data_dir)


async def _admin(server_url: str, statement: sql.Composed) -> None:
    async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
        await conn.execute(statement)


@pytest.fixture(scope="session")
async def template_name(server_url: str) -> AsyncIterator[str]:
    name = f"handoff_tpl_{uuid.uuid4().hex[:12]}"
    await _admin(server_url, sql.SQL("create database {}").format(sql.Identifier(name)))
    await migrate(with_database(server_url, name))
    yield name
    await _admin(
        server_url, sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
    )


@pytest.fixture
async def database_url(server_url: str, template_name: str) -> AsyncIterator[str]:
    name = f"handoff_t_{uuid.uuid4().hex[:12]}"
    await _admin(
        server_url,
        sql.SQL("create database {} template {}").format(
            sql.Identifier(name), sql.Identifier(template_name)
        ),
    )
    url = with_database(server_url, name)
    await migrate(url)  # nothing to apply; re-points the role's search_path in this database
    yield url
    await _admin(
        server_url, sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
    )
