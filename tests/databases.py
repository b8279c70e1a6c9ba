"""Real Postgres for tests and the reliability runner: a server, a migrated template, clones.

The server is DATABASE_URL's, else an embedded one. Every test (or scenario run) gets a fresh
database cloned from a migrated template, so runs never see each other's rows and cloning costs
milliseconds rather than a migration run.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from devkit.embedded_pg import start_embedded_postgres
from infra.migrate import migrate
from infra.settings import Settings


def with_database(url: str, name: str) -> str:
    return make_conninfo(url, dbname=name)


# The embedded test server is a throwaway server, as tests/pg_servers.py's are: without fsync,
# the checkpoint that every DROP DATABASE waits for (one per test) takes milliseconds, not the
# second or more it takes to flush a busy server's files. Both settings apply on reload, and
# ALTER SYSTEM keeps them in the test data directory only.
THROWAWAY_SQL = (
    "alter system set fsync = off",
    "alter system set full_page_writes = off",
    "select pg_reload_conf()",
)


def resolve_server_url() -> str:
    """DATABASE_URL's server as it is, else the embedded test server, set up as a throwaway."""
    url = Settings().database_url
    if url:
        return url
    url = start_embedded_postgres(Path(tempfile.gettempdir()) / f"handoff-test-pg-{os.getuid()}")
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in THROWAWAY_SQL:
            conn.execute(statement)
    return url


async def _admin(server_url: str, statement: sql.Composed) -> None:
    async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
        await conn.execute(statement)


async def _drop(server_url: str, name: str) -> None:
    await _admin(
        server_url, sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
    )


# What a Supabase project's `public` schema gives the API roles on every object created there
# (supabase/postgres's initial schema); a database with these before migrating is migrated as a
# real project is.
SUPABASE_DEFAULT_PRIVILEGES_SQL = """
alter default privileges in schema public
  grant all on tables to anon, authenticated, service_role;
alter default privileges in schema public
  grant all on sequences to anon, authenticated, service_role;
alter default privileges in schema public
  grant all on functions to anon, authenticated, service_role;
"""
# The roles, as the first migration creates them where they are absent, so that the defaults
# above can name them before it runs.
API_ROLES_SQL = """
do $$
begin
  if not exists (select from pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
end
$$
"""


# Roles belong to the server, not to a database, and migrate()'s lock to one database: test
# workers migrating their templates at once on a new server would race to create the roles.
# This lock, taken in the server's own database, is the server's.
SERVER_LOCK_SQL = "select pg_advisory_lock(hashtext('handoff.tests.roles'))"


@asynccontextmanager
async def _server_lock(server_url: str) -> AsyncIterator[None]:
    async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
        await conn.execute(SERVER_LOCK_SQL)
        yield  # released when the connection closes


@asynccontextmanager
async def migrated_template(server_url: str, *, supabase: bool = False) -> AsyncIterator[str]:
    """A migrated database to clone; with `supabase`, migrated under Supabase's default
    privileges."""
    name = f"handoff_tpl_{uuid.uuid4().hex[:12]}"
    await _admin(server_url, sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        url = with_database(server_url, name)
        async with _server_lock(server_url):
            if supabase:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    await conn.execute(API_ROLES_SQL)
                    await conn.execute(SUPABASE_DEFAULT_PRIVILEGES_SQL)
            await migrate(url)
        yield name
    finally:
        await _drop(server_url, name)


@asynccontextmanager
async def fresh_database(server_url: str, template: str) -> AsyncIterator[str]:
    name = f"handoff_t_{uuid.uuid4().hex[:12]}"
    await _admin(
        server_url,
        sql.SQL("create database {} template {}").format(
            sql.Identifier(name), sql.Identifier(template)
        ),
    )
    try:
        url = with_database(server_url, name)
        await migrate(url)  # nothing to apply; re-points the role's search_path in this database
        yield url
    finally:
        await _drop(server_url, name)
