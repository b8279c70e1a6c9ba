"""The background half: resume overhead, and 50 chats through the whole loop at once.

Both run the stack in this process (the app, the local executor, a real Postgres): the figures
come from the executor's intake, a tool that notes when it starts, and the database itself.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import psycopg
from langchain_core.tools import BaseTool, tool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bench.stack import NO_USER_LIMITS, create_chats
from demo.tools import demo_tools
from tests.support import fetch, helper_with, running_stack, token_for

# Client connections only: an autovacuum worker in the database shows there too.
CONNECTIONS_SQL = """
select count(*) as n from pg_stat_activity
where datname = current_database() and pid <> pg_backend_pid()
  and backend_type = 'client backend'
"""
COMPLETED_SQL = """
select m.chat_id, extract(epoch from m.updated_at)::float8 as done_at
from public.message m join public.job_runs j on j.root_message_id = m.id
where m.role = 'assistant' and m.status = 'completed' and j.status = 'completed'
"""


def accepted_times(into: list[float]) -> Callable[[ASGIApp], ASGIApp]:
    """Wrap the executor's intake: note when it answers 200 to an event post."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def intake(scope: Scope, receive: Receive, send: Send) -> None:
            async def noting(message: Message) -> None:
                if message["type"] == "http.response.start" and message["status"] == 200:
                    into.append(time.perf_counter())
                await send(message)

            await app(scope, receive, noting if scope["type"] == "http" else send)

        return intake

    return wrap


def stamp_tool(into: list[float]) -> BaseTool:
    @tool("stamp")
    async def stamp(input: str) -> str:
        """Note when the tool step started."""
        into.append(time.perf_counter())
        return "stamped"

    return stamp


async def resume_overhead(database_url: str, runs: int) -> list[float]:
    """Event accepted by the executor to the first tool step started, one job at a time."""
    accepted: list[float] = []
    started: list[float] = []
    user = uuid.uuid4()
    chats = await create_chats(database_url, user, runs + 1)
    tools = [*demo_tools(), stamp_tool(started)]
    async with running_stack(
        database_url,
        assistants=helper_with(tools),
        wrap_intake=accepted_times(accepted),
        **NO_USER_LIMITS,
    ) as s:
        for chat in chats:
            await s.respond(token_for(user), {"chatId": str(chat), "content": "/stamp now"})
            await s.executor.wait_idle(timeout=60)
    pairs = list(zip(accepted, started, strict=True))[1:]  # the first is a warm-up
    return [tool_at - event_at for event_at, tool_at in pairs]


@dataclass
class Concurrency:
    chats: int
    completed: int = 0
    pool_size: int = 0
    max_connections: int = 0
    seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def _sample(database_url: str, stop: asyncio.Event, seen: list[int]) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        while not stop.is_set():
            row = await (await conn.execute(CONNECTIONS_SQL)).fetchone()
            seen.append(int(row[0]) if row else 0)
            await asyncio.sleep(0.005)


async def whole_loop(database_url: str, chats_count: int) -> Concurrency:
    """`chats_count` chats send a tool turn at once; each runs to its finalized message."""
    figures = Concurrency(chats=chats_count)
    user = uuid.uuid4()
    chats = await create_chats(database_url, user, chats_count)
    seen: list[int] = []
    stop = asyncio.Event()
    sent: dict[uuid.UUID, float] = {}
    async with running_stack(database_url, **NO_USER_LIMITS) as stack:
        figures.pool_size = stack.settings.db_pool_max_size
        await stack.respond(token_for(user), {"chatId": str(chats[0]), "content": "warm up"})
        sampler = asyncio.create_task(_sample(database_url, stop, seen))

        async def chat_turn(chat: uuid.UUID) -> None:
            sent[chat] = time.time()
            events = await stack.respond(token_for(user), {"chatId": str(chat), "content": TURN})
            if events[-1][0] != "handoff":
                figures.errors.append(f"chat {chat}: ended with {events[-1]}")

        await _gather_noting(figures.errors, [chat_turn(c) for c in chats])
        await stack.executor.wait_idle(timeout=300)
        stop.set()
        await sampler
    done = {r["chat_id"]: r["done_at"] for r in await fetch(database_url, COMPLETED_SQL)}
    figures.completed = sum(1 for c in chats if c in done)
    figures.seconds = [done[c] - sent[c] for c in chats if c in done and c in sent]
    figures.max_connections = max(seen, default=0)
    return figures


TURN = "/calc 6*7"


async def _gather_noting(errors: list[str], turns: list[Awaitable[None]]) -> None:
    for result in await asyncio.gather(*turns, return_exceptions=True):
        if isinstance(result, BaseException):
            errors.append(repr(result))
