"""Retention: what nothing can still need, older than RETENTION_DAYS, goes (migration 0021).

A turn stores one checkpoint per run: its handoff point and each background round besides its
end. Edits, regenerates, branch switches and the next message start only from a branch head or
from a checkpoint a message names, so once the turn has ended the checkpoints between those are
never read again, except for the list blobs later checkpoints are deltas on (migration 0020),
which stay. `handoff.prune_thread` deletes them, their pending writes, and the tool results
whose output is inline, thread by thread, at most BATCH of each per statement, and leaves alone
every thread with an unfinished job: a turn running, queued or waiting for the user.

Safe while turns run: a turn starts from a checkpoint that is kept (a head, or one a message
names) and only adds checkpoints, which are newer than the cutoff. Idempotent: a second prune
finds nothing more. The operators' `handoff prune` (devkit/cli.py) and the daily function
`prune-threads` (functions/retention.py) both call `prune`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

import psycopg

from infra.db import Conn

BATCH = 500
# The threads with a checkpoint or a tool result older than the cutoff, after `after`.
THREADS_SQL = """
select thread_id from (
  select distinct c.thread_id from langgraph.checkpoints c
  where c.thread_id > %(after)s and c.checkpoint_ns = ''
    and (c.checkpoint ->> 'ts')::timestamptz < %(before)s
  union
  select distinct r.thread_id from handoff.tool_results r
  where r.thread_id > %(after)s and r.created_at < %(before)s
) t
order by thread_id
limit %(limit)s
"""
PRUNE_THREAD_SQL = "select * from handoff.prune_thread(%s, %s, %s)"


@dataclass(frozen=True)
class Pruned:
    """How many rows a prune deleted (or, dry, would delete), by table."""

    checkpoints: int = 0
    blobs: int = 0
    writes: int = 0
    tool_results: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def rows(self) -> int:
        return self.checkpoints + self.blobs + self.writes + self.tool_results


async def prune(conn: Conn, before: datetime, *, dry_run: bool = False) -> Pruned:
    """Delete what no thread can still need from before `before`, thread by thread; `dry_run`
    counts it and deletes nothing. `conn` must act as the service (autocommit)."""
    total = Pruned()
    after = ""
    while True:
        params = {"after": after, "before": before, "limit": BATCH}
        threads = [
            r["thread_id"] for r in await (await conn.execute(THREADS_SQL, params)).fetchall()
        ]
        for thread in threads:
            total += await (
                _count_thread(conn, thread, before)
                if dry_run
                else _prune_thread(conn, thread, before)
            )
        if len(threads) < BATCH:
            return total
        after = threads[-1]


async def _prune_thread(conn: Conn, thread: str, before: datetime) -> Pruned:
    """One thread pruned, BATCH rows of a table per statement, each its own transaction."""
    total = Pruned()
    while True:
        pruned = await _call(conn, thread, before, BATCH)
        total += pruned
        if max(pruned.checkpoints, pruned.tool_results) < BATCH:
            return total


async def _count_thread(conn: Conn, thread: str, before: datetime) -> Pruned:
    """What pruning one thread would delete: the whole prune, rolled back."""
    counted = Pruned()
    async with conn.transaction():
        counted = await _call(conn, thread, before, None)
        raise psycopg.Rollback
    return counted


async def _call(conn: Conn, thread: str, before: datetime, limit: int | None) -> Pruned:
    row = await (await conn.execute(PRUNE_THREAD_SQL, (thread, before, limit))).fetchone()
    assert row is not None  # the function returns one row
    return Pruned(**{name: int(value) for name, value in row.items()})
