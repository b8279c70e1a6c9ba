"""Turns a stopped `handoff dev` left unfinished, taken up by the next one.

The local executor keeps its runs in memory: when `handoff dev` stops (or is killed) during a
background job, the run goes with it, while the job stays `queued` or `processing` and holds
its chat's slot. The next `handoff dev` on the same database sends each such job's event again,
as a fresh run, the way a dashboard replay would: the run claims the job, resumes from the
latest durable checkpoint, and reuses every tool result stored before the stop.

That is only right when no other `handoff dev` is running those jobs, so every dev server holds
a shared advisory lock on its database for as long as it runs; one that can take the lock
exclusively at start knows it is alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from infra.db import Pool, connect
from infra.store import jobs
from infra.store.jobs import ReleasedJob
from turns.start import expire_dead_quick_turns

# pg_advisory_lock's key for "a handoff dev serves this database" ('hndf').
DEV_SERVER_LOCK = 0x686E6466
TRY_ALONE_SQL = "select pg_try_advisory_lock(%s) as alone"
SHARE_SQL = "select pg_advisory_lock_shared(%s)"
UNLOCK_SQL = "select pg_advisory_unlock(%s)"


@asynccontextmanager
async def dev_server_presence(database_url: str) -> AsyncIterator[bool]:
    """Mark this database as served by a dev server until the block ends (or the process
    dies: the lock goes with its connection). Yields True when no other dev server was
    serving it: whatever is unfinished then, nobody is running."""
    conn = await connect(database_url)
    try:
        row = await (await conn.execute(TRY_ALONE_SQL, (DEV_SERVER_LOCK,))).fetchone()
        alone = bool(row and row["alone"])
        await conn.execute(SHARE_SQL, (DEV_SERVER_LOCK,))
        if alone:
            await conn.execute(UNLOCK_SQL, (DEV_SERVER_LOCK,))
        yield alone
    finally:
        # Only closed, never committed: the connection may have died with its server meanwhile.
        await conn.close()


async def end_quick_turns_left_behind(pool: Pool) -> int:
    """The turns that were streaming on the stopped server's respond handler: none of them is
    alive, so none waits out its lease."""
    return await expire_dead_quick_turns(pool, lease_s=0)


async def jobs_left_behind(pool: Pool) -> list[ReleasedJob]:
    """Every unfinished turn, its job ready for a fresh run of its event. Only for a dev server
    that is alone on its database (`dev_server_presence`)."""
    await end_quick_turns_left_behind(pool)
    return await jobs.release_all(pool)
