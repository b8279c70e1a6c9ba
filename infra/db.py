"""The Postgres connection pool: one per process, opened lazily."""

from __future__ import annotations

import asyncio
import select
import time
import weakref
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.abc import Params, QueryNoTemplate
from psycopg.rows import DictRow, class_row, dict_row
from psycopg_pool import AsyncConnectionPool

# What a caller waiting for a connection gets once the pool is closed (the process is stopping).
from psycopg_pool import PoolClosed as PoolClosed

Conn = AsyncConnection[DictRow]
Pool = AsyncConnectionPool[Conn]
Row = TypeVar("Row")

# Transaction poolers (Supavisor, PgBouncer) hand each transaction to any backend, so a statement
# prepared on one backend is missing on the next: never prepare. LangGraph's saver expects
# autocommit connections with dict rows.
CONNECTION_KWARGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": None,
    "row_factory": dict_row,
}


# A connection back in the pool this recently is handed out again without the probe's round
# trip, unless its socket has something to read. What ends a connection while it is idle says
# so: a server or pooler that closes it (a restart, a failover, a terminated backend, an idle
# timeout, a recycle) sends its FATAL, FIN or RST, which poll(2) sees. Only a middlebox that
# forgets the connection says nothing, and they wait minutes first (AWS's NAT gateway: 350 s
# idle, then RST to the next packet). Chat requests come seconds apart, and each request's
# first statement waited for the probe while this was 1 s: a round trip before the first token.
RECENT_S = 30.0


def create_pool(database_url: str, *, max_size: int = 10, recent_s: float = RECENT_S) -> Pool:
    """A closed pool; `await pool.open()` before use (it must open inside the running loop).
    `recent_s`: how long after its return a quiet connection is handed out unprobed."""
    # When each idle connection came (back) into the pool, by the event loop's clock.
    idle_since: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()

    async def idle(conn: Conn) -> None:
        idle_since[conn] = time.monotonic()

    async def check(conn: Conn) -> None:
        since = idle_since.pop(conn, None)
        if since is not None and time.monotonic() - since < recent_s and _quiet(conn):
            return
        # A pooled connection can die with its server (restart, failover, pooler recycle);
        # probing on checkout costs one round trip and turns that into a fresh connection, not
        # an error.
        try:
            await conn.execute("select 1")
        except psycopg.Error:
            # The other idle connections died with it. The pool probes the next idle one only
            # after a backoff that doubles per failed probe (0, 1, 2, 4... s), so six dead idle
            # connections outlast the 30 s checkout timeout. Sweep them all now: the caller's
            # next try gets a fresh connection (or waits for one while the server is down).
            await pool.check()
            raise

    pool: Pool = AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=max_size,
        kwargs=CONNECTION_KWARGS,
        connection_class=AsyncConnection[DictRow],
        configure=idle,
        reset=idle,
        check=check,
        open=False,
    )
    return pool


def _quiet(conn: Conn) -> bool:
    """Whether an idle connection's socket has nothing to read: no error, no EOF, no notice.
    Where poll(2) is missing, never (the probe decides)."""
    if conn.closed or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    return not poller.poll(0)


async def fetch_rows(
    conn: Conn, shape: type[Row], query: QueryNoTemplate, params: Params | None = None
) -> list[Row]:
    """The rows of `query`, each read into `shape`, a class whose fields are its columns."""
    async with conn.cursor(row_factory=class_row(shape)) as cursor:
        return await (await cursor.execute(query, params)).fetchall()


async def fetch_row(
    conn: Conn, shape: type[Row], query: QueryNoTemplate, params: Params | None = None
) -> Row | None:
    """The first row of `query` read into `shape`, or None."""
    async with conn.cursor(row_factory=class_row(shape)) as cursor:
        return await (await cursor.execute(query, params)).fetchone()


async def connect(database_url: str) -> Conn:
    """A single connection with the pool's settings, for migrations and the CLI."""
    return await AsyncConnection.connect(database_url, **CONNECTION_KWARGS)


async def reachable(database_url: str, *, timeout_s: float = 2.0) -> bool:
    """Whether a new connection to the database can be made within `timeout_s`. A pool whose
    server is down says so only when a caller's wait reaches the pool's timeout (30 s)."""
    try:
        async with asyncio.timeout(timeout_s):
            conn = await AsyncConnection.connect(database_url, autocommit=True)
        await conn.close()
    except (psycopg.Error, OSError, TimeoutError):
        return False
    return True
