"""First token against the floor and the LangGraph server, runs per second, handoff latency.

Every server runs in a child process, the clients in this one; runs are interleaved, so a
noisy moment of the machine lands on all sides alike.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from bench import langgraph_server as lg
from bench.floor import FLOOR_PATH
from bench.sse import Stream, post_stream
from bench.sse import client as sse_client
from bench.stack import child_server, create_owned_chats
from tests.support import fetch, token_for

PLAIN = "What is the fastest way to get a first token on the screen?"
TOOL = "/calc 6*7"
RESPOND_PATH = "/api/chat/respond"
# Every chat carries at most this many turns, so history loads read a short real history.
TURNS_PER_CHAT = 10
# The pause before each run of the idle first tokens.
IDLE_S = 1.0
# Runs per second: the median of this many rounds, each side's in turn.
THROUGHPUT_ROUNDS = 4

Side = str  # "handoff" | "floor" | "langgraph"


@dataclass
class QuickPathFigures:
    first_token: dict[Side, list[float]] = field(default_factory=dict)
    # Each run after IDLE_S with nothing to do, as a deployment between a chat's messages.
    first_token_idle: dict[Side, list[float]] = field(default_factory=dict)
    runs_per_s: dict[Side, float] = field(default_factory=dict)
    # How busy the machine's cores were, all together, over each side's rounds (None: no
    # /proc/stat). A side held back by its own waits leaves them idle.
    cores_busy: dict[Side, float | None] = field(default_factory=dict)
    handoff: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _first_token(stream: Stream) -> float:
    token = stream.first("token")
    if stream.status != 200 or token is None:
        raise RuntimeError(f"no token (status {stream.status})")
    return token.at - stream.sent


class Sides:
    """One client per side, and how each side runs one turn on a fresh or reused chat."""

    def __init__(self, database_url: str, origins: dict[Side, str]) -> None:
        self.database_url = database_url
        self.origins = origins
        self.tokens: dict[uuid.UUID, str] = {}  # each chat's owner's
        self.http = {side: sse_client(origin) for side, origin in origins.items()}

    async def chats(self, count: int) -> list[uuid.UUID]:
        """`count` new chats, each of a user of its own."""
        owned = await create_owned_chats(self.database_url, count)
        expires = int(time.time()) + 24 * 3600
        self.tokens.update((chat, token_for(user, exp=expires)) for chat, user in owned)
        return [chat for chat, _ in owned]

    async def close(self) -> None:
        for client in self.http.values():
            await client.aclose()

    async def handoff_turn(self, chat: uuid.UUID, content: str) -> Stream:
        body = {"chatId": str(chat), "content": content}
        headers = {"Authorization": f"Bearer {self.tokens[chat]}"}
        return await post_stream(self.http["handoff"], RESPOND_PATH, body, headers)

    async def floor_turn(self, content: str) -> Stream:
        return await post_stream(self.http["floor"], FLOOR_PATH, {"content": content})

    async def langgraph_turn(self, thread: str, content: str) -> float:
        stream = await lg.run_stream(self.http["langgraph"], thread, content)
        at = lg.first_token_at(stream)
        if stream.status != 200 or at is None:
            raise RuntimeError(f"langgraph: no token (status {stream.status})")
        return at - stream.sent


async def first_tokens(sides: Sides, runs: int, figures: QuickPathFigures) -> None:
    """Handoff and the floor alternately, back to back; then the LangGraph server on its own
    (its runs take a second each, which would leave the others idle between theirs); then
    Handoff and the floor again, each run after `IDLE_S` of nothing."""
    chats = await sides.chats(max(1, runs // TURNS_PER_CHAT))
    threads = await _threads(sides, runs + 1)
    pair: dict[Side, Callable[[int], Awaitable[float]]] = {
        "handoff": lambda i: _ft(sides.handoff_turn(chats[i % len(chats)], PLAIN)),
        "floor": lambda i: _ft(sides.floor_turn(PLAIN)),
    }
    for side in pair:  # one warm-up each (imports, pools, first compile), on its own thread
        await pair[side](-1)
    await _alternate(pair, runs, figures.first_token, figures.errors)
    if threads:
        langgraph: dict[Side, Callable[[int], Awaitable[float]]] = {
            "langgraph": lambda i: sides.langgraph_turn(threads[i + 1], PLAIN)
        }
        await langgraph["langgraph"](-1)
        await _alternate(langgraph, runs, figures.first_token, figures.errors)
    await _alternate(pair, max(1, runs // 5), figures.first_token_idle, figures.errors, IDLE_S)


async def _alternate(
    turns: dict[Side, Callable[[int], Awaitable[float]]],
    runs: int,
    into: dict[Side, list[float]],
    errors: list[str],
    idle_s: float = 0,
) -> None:
    """`runs` first tokens a side, the sides taking turns to go first; `idle_s` before each."""
    order = list(turns)
    for i in range(runs):
        for side in order[i % len(order) :] + order[: i % len(order)]:
            await asyncio.sleep(idle_s)
            try:
                into.setdefault(side, []).append(await turns[side](i))
            except Exception as exc:
                errors.append(f"first token, {side}, run {i}: {exc!r}")


async def _threads(sides: Sides, count: int) -> list[str]:
    if "langgraph" not in sides.origins:
        return []
    return [await lg.create_thread(sides.http["langgraph"]) for _ in range(count)]


async def _ft(stream: Awaitable[Stream]) -> float:
    return _first_token(await stream)


async def throughput(sides: Sides, runs: int, clients: int, figures: QuickPathFigures) -> None:
    """Completed runs per second with `clients` concurrent clients, fresh chat/thread per run:
    the median of `THROUGHPUT_ROUNDS` rounds, the sides taking turns, so that a noisy few
    seconds of the machine fall on one round of each side rather than on one side's whole
    figure."""
    chats = await sides.chats(runs)
    threads = await _threads(sides, runs)

    async def handoff(i: int) -> bool:
        return (await sides.handoff_turn(chats[i], PLAIN)).last("done") is not None

    async def floor(i: int) -> bool:
        return (await sides.floor_turn(PLAIN)).last("done") is not None

    async def langgraph(i: int) -> bool:
        stream = await lg.run_stream(sides.http["langgraph"], threads[i], PLAIN)
        return stream.status == 200 and lg.first_token_at(stream) is not None

    kinds: dict[Side, Callable[[int], Awaitable[bool]]] = {"handoff": handoff, "floor": floor}
    if threads:
        kinds["langgraph"] = langgraph
    rounds = max(1, min(THROUGHPUT_ROUNDS, runs // clients))
    rates: dict[Side, list[float]] = {side: [] for side in kinds}
    ticks: dict[Side, list[int]] = {side: [0, 0] for side in kinds}  # busy, all
    for r in range(rounds):
        part = range(r * runs // rounds, (r + 1) * runs // rounds)
        for side, run in kinds.items():
            before = _cpu_ticks()
            rates[side].append(await _drive(run, part, clients, figures.errors, side))
            after = _cpu_ticks()
            if before is not None and after is not None:
                ticks[side][0] += after[0] - before[0]
                ticks[side][1] += after[1] - before[1]
    figures.runs_per_s.update((side, statistics.median(rate)) for side, rate in rates.items())
    figures.cores_busy.update(
        (side, busy / all if all else None) for side, (busy, all) in ticks.items()
    )


def _cpu_ticks() -> tuple[int, int] | None:
    """The machine's CPU time so far, in clock ticks: busy, and all (busy and idle)."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(t) for t in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


async def _drive(
    run: Callable[[int], Awaitable[bool]],
    runs: range,
    clients: int,
    errors: list[str],
    side: Side,
) -> float:
    queue = iter(runs)
    completed = 0

    async def client() -> None:
        nonlocal completed
        for i in queue:
            try:
                ok = await run(i)  # awaited first: `completed += await` would lose increments
            except Exception as exc:
                errors.append(f"throughput, {side}, run {i}: {exc!r}")
            else:
                completed += ok

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return completed / (time.perf_counter() - started)


async def handoff_latency(sides: Sides, runs: int, figures: QuickPathFigures) -> None:
    """Last token to `handoff` on the client: pause before tools, checkpoint copy, the one
    transaction, the event's emit. Each run waits for its background job before the next."""
    chats = await sides.chats(runs + 1)
    for i, chat in enumerate(chats):
        stream = await sides.handoff_turn(chat, TOOL)
        last_token, handoff = stream.last("token"), stream.last("handoff")
        if last_token is None or handoff is None:
            figures.errors.append(f"handoff, run {i}: events {[e.event for e in stream.events]}")
            continue
        if i:  # the first is a warm-up
            figures.handoff.append(handoff.at - last_token.at)
        await _job_done(sides.database_url, chat)


async def _job_done(database_url: str, chat: uuid.UUID) -> None:
    async with asyncio.timeout(30):
        while True:
            rows = await fetch(database_url, "select status from job_runs where chat_id = %s", chat)
            if rows and rows[0]["status"] in ("completed", "error"):
                return
            await asyncio.sleep(0.01)


async def measure(
    database_url: str,
    *,
    runs: int,
    throughput_runs: int,
    clients: int,
    handoffs: int,
    langgraph: bool,
) -> QuickPathFigures:
    figures = QuickPathFigures()
    async with AsyncExitStack() as stack:
        origins = {
            "handoff": await stack.enter_async_context(child_server("handoff", database_url)),
            "floor": await stack.enter_async_context(child_server("floor")),
        }
        if langgraph:
            try:
                origins["langgraph"] = await stack.enter_async_context(lg.langgraph_server())
            except lg.LangGraphUnavailable as exc:
                figures.errors.append(f"langgraph server: {exc}")
        sides = Sides(database_url, origins)
        stack.push_async_callback(sides.close)
        await first_tokens(sides, runs, figures)
        await throughput(sides, throughput_runs, clients, figures)
        await handoff_latency(sides, handoffs, figures)
    return figures
