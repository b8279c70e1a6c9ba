"""Where a turn's history load goes, at a short and a long conversation, against what the model
request costs for the same history.

    uv run python -m bench.history_load                 # turns 10 and 200, 30 runs each
    uv run python -m bench.history_load --turns 10,50 --runs 10

One conversation goes through the quick path (bench/growth.py's turns); at each turn named it
times `turns/engine.load_run`'s "load history" whole (`load_latest_into_memory` into a fresh
in-memory saver) and then piece by piece, the same steps one after the other:

- the head's query: the checkpoint row with its blobs and pending writes (one round trip), and
  the bytes it brings;
- decoding it: the whole blobs, the pending writes (read on a worker thread by the library);
- the delta chain of each list channel: its query (one round trip) and bytes, and rebuilding
  the list from the blobs;
- seeding the turn's in-memory saver with it (`TurnMemory`, infra/store/turn_memory.py), which
  holds it as decoded and encodes a value only once a read needs it stored;
- the run's first read of it, which gets it as seeded;
- the whole load again with the process's history cache (infra/store/history_cache.py), which
  the turns before filled: the head row, and only what the last turn added decoded.

Against these, what any design pays each turn for the same messages, since the model is sent
the whole history: turning them into the provider's request (langchain-openai's and
langchain-anthropic's `_get_request_payload`, then `json.dumps` of the payload, as the SDK's
HTTP client does). And the whole turn as the client sees it (`respond`, request to `done`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AnyMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from agent.threads import ThreadId, thread_config, thread_key
from bench.growth import MESSAGE, load_time
from bench.stack import NO_USER_LIMITS, create_chats
from bench.stats import Table, ms, p50
from infra.db import Pool, create_pool
from infra.store.checkpoints import (
    CHAIN_SQL,
    DELTA,
    CompactSaver,
    _Delta,
    durable_saver,
    seed_memory,
)
from infra.store.turn_memory import TurnMemory
from tests.databases import fresh_database, migrated_template, resolve_server_url
from tests.support import running_stack, token_for

LATEST = "WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1"
STEPS = (
    "head query",
    "decode head",
    "chain query",
    "rebuild lists",
    "into memory saver",
    "run's first read",
    "OpenAI request body",
    "Anthropic request body",
)


@dataclass
class Point:
    """The figures at one turn: p50 seconds of each step, and what was fetched."""

    turn: int
    messages: int = 0
    head_bytes: int = 0
    chain_bytes: int = 0
    chain_rows: int = 0
    round_trips: int = 0
    load_s: float = 0.0  # the whole load without the history cache
    cached_s: float = 0.0  # the whole load as load_run does it, with the process's cache
    turn_s: float = 0.0  # the turn itself, request to `done`
    steps: dict[str, float] = field(default_factory=dict)


def _providers() -> list[tuple[str, Callable[[list[AnyMessage]], Any]]]:
    """Each provider's conversion of a history into its request body (no request is sent)."""
    key = SecretStr("unused")
    openai = ChatOpenAI(model="gpt-4o-mini", api_key=key)
    anthropic = ChatAnthropic(model="claude-sonnet-4-5", api_key=key)
    return [
        ("OpenAI request body", lambda m: json.dumps(openai._get_request_payload(m))),
        ("Anthropic request body", lambda m: json.dumps(anthropic._get_request_payload(m))),
    ]


async def _once(durable: CompactSaver, thread: ThreadId, point: Point) -> dict[str, float]:
    """One load, step by step; fills the fetch figures of `point`."""
    took: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        took[step] = took.get(step, 0.0) + now - clock
        clock = now

    async with durable._cursor() as cur:
        await cur.execute(durable.SELECT_SQL + LATEST, (thread,), binary=True)
        row = await cur.fetchone()
    assert row is not None
    lap("head query")
    point.head_bytes = len(json.dumps(row["checkpoint"])) + sum(
        len(part) for blob in row["channel_values"] or [] for part in blob
    )
    found = await durable._load_checkpoint_tuple(row)
    lap("decode head")
    values = found.checkpoint["channel_values"]
    point.round_trips, point.chain_bytes, point.chain_rows = 1, 0, 0
    for channel, delta in list(values.items()):
        if not isinstance(delta, _Delta):
            continue
        params = {"thread_id": thread, "ns": "", "channel": channel, "version": delta.base}
        async with durable._cursor() as cur:
            await cur.execute(CHAIN_SQL, params)
            rows = await cur.fetchall()
        lap("chain query")
        point.round_trips += 1
        point.chain_rows += len(rows)
        point.chain_bytes += sum(len(r["blob"] or b"") for r in rows)
        items: list[Any] = list(durable.serde.loads_typed((rows[0]["type"], rows[0]["blob"])))
        for r in rows[1:]:
            assert r["type"].startswith(DELTA)
            items = durable._applied(items, int(r["type"].split(":", 2)[1]), r["blob"])
        values[channel] = durable._applied(items, delta.kept, delta.added)
        lap("rebuild lists")
    memory = TurnMemory()
    config = thread_config(thread)
    await seed_memory(memory, found)
    lap("into memory saver")
    read = await memory.aget_tuple(config)
    lap("run's first read")
    assert read is not None
    messages: list[AnyMessage] = read.checkpoint["channel_values"]["messages"]
    point.messages = len(messages)
    for step, body in _providers_cached():
        body(messages)
        lap(step)
    return took


_PROVIDERS: list[tuple[str, Callable[[list[AnyMessage]], Any]]] = []


def _providers_cached() -> list[tuple[str, Callable[[list[AnyMessage]], Any]]]:
    if not _PROVIDERS:
        _PROVIDERS.extend(_providers())
    return _PROVIDERS


async def split(pool: Pool, thread: ThreadId, turn: int, runs: int) -> Point:
    """The figures of one turn: p50 of `runs` of each step and of the whole load."""
    point = Point(turn)
    durable = durable_saver(pool)
    laps = [await _once(durable, thread, point) for _ in range(runs)]
    point.steps = {step: p50([lap.get(step, 0.0) for lap in laps]) for step in STEPS}
    point.load_s = await load_time(pool, thread, runs, cache=None)
    point.cached_s = await load_time(pool, thread, runs)
    return point


async def measure(database_url: str, at: Sequence[int], runs: int) -> list[Point]:
    """One conversation to the last turn of `at`; the figures at each turn of `at`."""
    user = uuid.uuid4()
    [chat] = await create_chats(database_url, user, 1)
    thread = thread_key(chat, "default")
    points, turn_s = [], []
    pool = create_pool(database_url, max_size=1)
    await pool.open()
    try:
        async with running_stack(database_url, **NO_USER_LIMITS) as stack:
            for turn in range(1, max(at) + 1):
                started = time.perf_counter()
                body = {"chatId": str(chat), "content": MESSAGE}
                events = await stack.respond(token_for(user), body)
                turn_s.append(time.perf_counter() - started)
                if events[-1][0] != "done":
                    raise RuntimeError(f"turn {turn} ended with {events[-1]}")
                if turn in at:
                    point = await split(pool, thread, turn, runs)
                    point.turn_s = p50(turn_s[-5:])
                    points.append(point)
    finally:
        await pool.close()
    return points


def render(points: list[Point]) -> str:
    """The step table and the fetch table, turns side by side."""
    heads = tuple(f"turn {p.turn} ({p.messages} msgs) ms" for p in points)
    steps = Table("History load, step by step (p50)", ("step", *heads))
    for step in STEPS[:6]:
        steps.add(step, *(ms(p.steps[step]) for p in points))
    steps.add("sum of the steps", *(ms(sum(p.steps[s] for s in STEPS[:6])) for p in points))
    steps.add("the load, whole, without the cache", *(ms(p.load_s) for p in points))
    steps.add("the load as load_run does it (cache)", *(ms(p.cached_s) for p in points))
    for step in STEPS[6:]:
        steps.add(step, *(ms(p.steps[step]) for p in points))
    steps.add("the turn, request to done (p50 of 5)", *(ms(p.turn_s) for p in points))
    fetched = Table("What the load fetches", ("figure", *(f"turn {p.turn}" for p in points)))
    fetched.add("round trips", *(p.round_trips for p in points))
    fetched.add("head row bytes", *(p.head_bytes for p in points))
    fetched.add("chain rows", *(p.chain_rows for p in points))
    fetched.add("chain blob bytes", *(p.chain_bytes for p in points))
    return f"{steps.render()}\n\n{fetched.render()}\n"


async def run(at: Sequence[int], runs: int) -> list[Point]:
    server = resolve_server_url()
    async with migrated_template(server) as template, fresh_database(server, template) as url:
        return await measure(url, at, runs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", default="10,200", help="turns to measure at (10,200)")
    parser.add_argument("--runs", type=int, default=30, help="loads per turn measured (30)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    at = sorted({int(t) for t in args.turns.split(",")})
    print(render(asyncio.run(run(at, args.runs))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
