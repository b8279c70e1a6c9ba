"""Applies `infra/migrations/*.sql` in order, then LangGraph's checkpoint migrations."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from importlib import resources

from langgraph.checkpoint.postgres.base import BasePostgresSaver

from agent.assistants import Assistant
from infra.db import Conn, connect
from infra.store.assistants import sync_catalogue

logger = logging.getLogger(__name__)

CREATE_LEDGER_SQL = """
create schema if not exists handoff;
revoke all on schema handoff from public;
create table if not exists handoff.migrations (
  name text primary key,
  applied_at timestamptz not null default now()
)
"""
# Concurrent runners on one database (two deploys at once) wait here instead of racing.
LOCK_SQL = "select pg_advisory_xact_lock(hashtext('handoff.migrations'))"
APPLIED_SQL = "select name from handoff.migrations"
RECORD_SQL = "insert into handoff.migrations (name) values (%s)"

# What names LangGraph's checkpoint migrations among those applied: `langgraph:<version>`.
CHECKPOINT_PREFIX = "langgraph:"
CHECKPOINT_LEDGER_SQL = (
    "create table if not exists langgraph.checkpoint_migrations (v integer primary key)"
)
CHECKPOINT_APPLIED_SQL = "select v from langgraph.checkpoint_migrations"
CHECKPOINT_RECORD_SQL = "insert into langgraph.checkpoint_migrations (v) values (%s)"
# Scoped to the transaction, so it holds through a transaction pooler and leaks to nothing else.
CHECKPOINT_SEARCH_PATH_SQL = "select set_config('search_path', 'langgraph', true)"
# The saver's SQL names its tables without a schema. A role setting (not a connection option)
# points new sessions at them, because transaction poolers drop startup options and session
# SETs. Per database, so a database cloned from a template needs it again: always (re)applied.
ROLE_SEARCH_PATH_SQL = """
do $$
begin
  execute format(
    'alter role %I in database %I set search_path = "$user", public, extensions, langgraph',
    current_user,
    current_database()
  );
end
$$
"""


def migration_files() -> list[tuple[str, str]]:
    """(name, sql) of every migration, in order."""
    folder = resources.files("infra") / "migrations"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [(f.name, f.read_text(encoding="utf-8")) for f in files]


def applied_text(applied: Sequence[str]) -> str:
    """What `migrate` applied, by whose migrations they are: infra/migrations' own and the
    LangGraph checkpointer's ("24 of Handoff's and 10 of the LangGraph checkpointer's applied")."""
    theirs = sum(name.startswith(CHECKPOINT_PREFIX) for name in applied)
    ours = len(applied) - theirs
    counts = [f"{ours} of Handoff's"] if ours else []
    counts += [f"{theirs} of the LangGraph checkpointer's"] if theirs else []
    return " and ".join(counts) + " applied" if counts else "none to apply"


async def migrate(database_url: str, assistants: Iterable[Assistant] | None = None) -> list[str]:
    """Bring the database up to date, and `public.assistant` in step with `assistants` (the
    deployment's, when given); returns the names of the migrations applied now."""
    async with await connect(database_url) as conn:
        applied = await _apply_sql_migrations(conn)
        applied += await _apply_checkpoint_migrations(conn)
        await conn.execute(ROLE_SEARCH_PATH_SQL)
        if assistants is not None:
            async with conn.transaction():
                await sync_catalogue(conn, assistants)
    return applied


async def _apply_sql_migrations(conn: Conn) -> list[str]:
    applied: list[str] = []
    async with conn.transaction():
        await conn.execute(LOCK_SQL)
        await conn.execute(CREATE_LEDGER_SQL)
        done = {row["name"] for row in await (await conn.execute(APPLIED_SQL)).fetchall()}
        for name, sql in migration_files():
            if name in done:
                continue
            logger.info("applying migration", extra={"migration": name})
            await conn.execute(sql)
            await conn.execute(RECORD_SQL, (name,))
            applied.append(name)
    return applied


async def _apply_checkpoint_migrations(conn: Conn) -> list[str]:
    # The saver's own setup() runs CREATE INDEX CONCURRENTLY outside a transaction and relies on a
    # session search_path; both break behind a transaction pooler. Its statements are idempotent,
    # so run them here, each batch in one transaction with a transaction-local search_path.
    applied: list[str] = []
    async with conn.transaction():
        await conn.execute(LOCK_SQL)
        await conn.execute(CHECKPOINT_LEDGER_SQL)
        done = {row["v"] for row in await (await conn.execute(CHECKPOINT_APPLIED_SQL)).fetchall()}
        await conn.execute(CHECKPOINT_SEARCH_PATH_SQL)
        for version, statement in enumerate(BasePostgresSaver.MIGRATIONS):
            if version in done:
                continue
            await conn.execute(re.sub(r"\bCONCURRENTLY\b", "", statement))
            await conn.execute(CHECKPOINT_RECORD_SQL, (version,))
            applied.append(f"{CHECKPOINT_PREFIX}{version}")
    return applied
