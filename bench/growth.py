"""Checkpoint growth: bytes written to the checkpoint tables per turn of one long conversation.

Every turn goes through the quick path (plain messages, so each turn completes there). After
each, the bench sums the stored row sizes of the thread in LangGraph's three tables; the
difference is what the turn wrote. `latest` is what the newest checkpoint alone needs (its
blobs), the floor any pruning of older checkpoints could reach. At the turns named in
`load_at`, it also times loading the thread's latest checkpoint into memory, what every turn
does before its model call (`turns/engine.load_run`'s "load history").
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from langchain_openai import ChatOpenAI
from psycopg.rows import dict_row
from pydantic import SecretStr

from agent.threads import ThreadId, thread_config, thread_key
from bench.stack import NO_USER_LIMITS, create_chats
from bench.stats import p50
from infra.db import Pool, create_pool
from infra.store.checkpoints import durable_saver, load_latest_into_memory
from infra.store.history_cache import HISTORY, HistoryCache
from infra.store.turn_memory import TurnMemory
from tests.support import running_stack, token_for

THREAD_BYTES_SQL = """
select
  (select coalesce(sum(pg_column_size(c.*)), 0) from langgraph.checkpoints c
    where c.thread_id = %(t)s) as checkpoints,
  (select coalesce(sum(pg_column_size(b.*)), 0) from langgraph.checkpoint_blobs b
    where b.thread_id = %(t)s) as blobs,
  (select coalesce(sum(pg_column_size(w.*)), 0) from langgraph.checkpoint_writes w
    where w.thread_id = %(t)s) as writes,
  (select count(*) from langgraph.checkpoints c where c.thread_id = %(t)s) as rows
"""
# The newest checkpoint row plus the blobs it is read from: those its channel versions name and,
# for a list stored as a delta, each blob down its chain (infra/store/checkpoints.py).
LATEST_BYTES_SQL = """
with recursive latest as (
  select * from langgraph.checkpoints where thread_id = %(t)s
  order by checkpoint_id desc limit 1
), used (channel, version, type, size) as (
  select b.channel, b.version, b.type, pg_column_size(b.*)
  from latest l, jsonb_each_text(l.checkpoint -> 'channel_versions') v(channel, version),
    langgraph.checkpoint_blobs b
  where b.thread_id = l.thread_id and b.checkpoint_ns = l.checkpoint_ns
    and b.channel = v.channel and b.version = v.version
  union
  select b.channel, b.version, b.type, pg_column_size(b.*)
  from used u join langgraph.checkpoint_blobs b
    on b.thread_id = %(t)s and b.checkpoint_ns = '' and b.channel = u.channel
   and b.version = split_part(u.type, ':', 3)
  where u.type like 'delta:%%'
)
select (select pg_column_size(l.*) from latest l)
  + coalesce((select sum(size) from used), 0) as latest
"""
MESSAGE = "Tell me something about checkpoints, in a sentence or two of plain words."


@dataclass(frozen=True)
class TurnBytes:
    turn: int
    written: int  # bytes this turn added to the three tables
    total: int
    latest: int
    checkpoints: int  # checkpoint rows of the thread so far
    load_s: float | None = None  # p50 time to load the thread's latest checkpoint, if timed
    # p50 time to build the OpenAI request body of the same history (no request sent), if timed:
    # what every turn pays for the whole history whatever the storage.
    body_s: float | None = None


@dataclass(frozen=True)
class Growth:
    rows: list[TurnBytes] = field(default_factory=list)

    def at(self, turn: int) -> TurnBytes:
        return self.rows[turn - 1]


async def _one_row(database_url: str, query: str, params: dict[str, Any]) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        row = await (await conn.execute(query, params)).fetchone()
    return row or {}


async def _sizes(database_url: str, thread: str) -> tuple[int, int, int]:
    row = await _one_row(database_url, THREAD_BYTES_SQL, {"t": thread})
    latest = await _one_row(database_url, LATEST_BYTES_SQL, {"t": thread})
    total = int(row["checkpoints"]) + int(row["blobs"]) + int(row["writes"])
    return total, int(latest.get("latest") or 0), int(row["rows"])


async def load_time(
    pool: Pool, thread: ThreadId, runs: int = 30, cache: HistoryCache | None = HISTORY
) -> float:
    """p50 seconds to seed a turn's in-memory saver (`TurnMemory`) with the thread's latest
    checkpoint, as a turn does (with the process's history cache, which the turns before it
    filled), or without a cache (`cache=None`: the whole chain read each time)."""
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        await load_latest_into_memory(durable_saver(pool, cache=cache), TurnMemory(), thread)
        seconds.append(time.perf_counter() - started)
    return p50(seconds)


async def body_time(pool: Pool, thread: ThreadId, runs: int = 30) -> float:
    """p50 seconds to turn the thread's history into an OpenAI request body, as langchain-openai
    does before each model call (its own conversion and `json.dumps`)."""
    latest = await durable_saver(pool).aget_tuple(thread_config(thread))
    assert latest is not None
    messages = latest.checkpoint["channel_values"]["messages"]
    model = ChatOpenAI(model="gpt-4o-mini", api_key=SecretStr("unused"))
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        json.dumps(model._get_request_payload(messages))
        seconds.append(time.perf_counter() - started)
    return p50(seconds)


async def measure(database_url: str, turns: int, load_at: frozenset[int] = frozenset()) -> Growth:
    user = uuid.uuid4()
    [chat] = await create_chats(database_url, user, 1)
    thread = thread_key(chat, "default")
    out = Growth()
    before = 0
    pool = create_pool(database_url, max_size=1)
    await pool.open()
    try:
        async with running_stack(database_url, **NO_USER_LIMITS) as stack:
            for turn in range(1, turns + 1):
                body = {"chatId": str(chat), "content": MESSAGE}
                events = await stack.respond(token_for(user), body)
                if events[-1][0] != "done":
                    raise RuntimeError(f"turn {turn} ended with {events[-1]}")
                total, latest, rows = await _sizes(database_url, thread)
                timed = turn in load_at
                loaded = await load_time(pool, thread) if timed else None
                request = await body_time(pool, thread) if timed else None
                row = TurnBytes(turn, total - before, total, latest, rows, loaded, request)
                out.rows.append(row)
                before = total
    finally:
        await pool.close()
    return out


def growth_per_turn(rows: list[TurnBytes]) -> float:
    """Least-squares slope of bytes written per turn against the turn number: 0 means each
    turn costs the same (linear total); positive means each costs more (quadratic total)."""
    n = len(rows)
    if n < 2:
        return float("nan")
    mean_x = sum(r.turn for r in rows) / n
    mean_y = sum(r.written for r in rows) / n
    num = sum((r.turn - mean_x) * (r.written - mean_y) for r in rows)
    den = sum((r.turn - mean_x) ** 2 for r in rows)
    return num / den
