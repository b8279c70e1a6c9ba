"""The Postgres connection pool: one per process, opened lazily."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

Conn = AsyncConnection[DictRow]
Pool = AsyncConnectionPool[Conn]

# Transaction poolers (Supavisor, PgBouncer) hand each transaction to any backend, so a statement
# prepared on one backend is missing on the next: never prepare. LangGraph's saver expects
# autocommit connections with dict rows.
CONNECTION_KWARGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": None,
    "row_factory": dict_row,
}


async def _check(conn: Conn) -> None:
    # A pooled connection can die with its server (restart, failover, pooler recycle); probing
    # on checkout costs one round trip and turns that into a fresh connection, not an error.
    await conn.execute("select 1")


def create_pool(database_url: str, *, max_size: int = 10) -> Pool:
    """A closed pool; `await pool.open()` before use (it must open inside the running loop)."""
    return AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=max_size,
        kwargs=CONNECTION_KWARGS,
        connection_class=AsyncConnection[DictRow],
        check=_check,
        open=False,
    )


async def connect(database_url: str) -> Conn:
    """A single connection with the pool's settings, for migrations and the CLI."""
    return await AsyncConnection.connect(database_url, **CONNECTION_KWARGS)
