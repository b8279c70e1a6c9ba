"""Database faults, one run per call, measured as figures.

* `postgres_restart_run`: Postgres restarts while a background tool step runs; the run must
  finish and the app's pool must serve the next turn without an app restart.
* `pgbouncer_run`: the app reaches Postgres only through PgBouncer in transaction mode (as it
  reaches Supabase through Supavisor); a handoff turn and a follow-up turn must work.

Each returns `Figures` for the run; pass an `Observed` to also get the rows and events behind
them. The tests assert on both; bench/reliability.py repeats the runs and aggregates figures.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, tool
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from demo.tools import demo_tools
from demo.tools import sleep as demo_sleep
from infra.migrate import migrate
from infra.runtime import Services
from tests.databases import fresh_database, migrated_template, resolve_server_url, with_database
from tests.pg_servers import RestartablePostgres, StopMode, pgbouncer, restartable_postgres
from tests.reliability.scenarios import Figures
from tests.support import (
    Stack,
    create_user_with_chat,
    durable_messages,
    fetch,
    helper_with,
    running_stack,
    token_for,
)

Event = tuple[str, dict[str, Any]]

# Generous next to the few seconds a run takes, so a stuck run fails the run, not the session.
RUN_TIMEOUT_S = 30.0


@dataclass
class Observed:
    """What a run saw, for callers that check more than the figures."""

    turns: list[list[Event]] = field(default_factory=list)  # SSE events, one list per turn
    messages: list[dict[str, Any]] = field(default_factory=list)  # assistant rows, oldest first
    jobs: list[dict[str, Any]] = field(default_factory=list)
    history: list[BaseMessage] = field(default_factory=list)  # the thread's durable messages
    outage_seconds: float | None = None  # restart scenario: how long Postgres was down
    restarted_during_tool_step: bool | None = None  # restart scenario: the fault hit mid-step
    pooler_logins: int | None = None  # pgbouncer scenario: client logins to the run's database


async def postgres_restart_run(
    server: RestartablePostgres | None = None,
    *,
    sleep_seconds: float = 1.0,
    stop_mode: StopMode = "fast",
    warm_connections: int = 8,
    observed: Observed | None = None,
) -> Figures:
    """GIVEN an app whose pool holds `warm_connections` idle connections (what a burst of
    requests leaves behind) and a turn whose tool sleeps `sleep_seconds` in the background,
    WHEN Postgres restarts (`stop_mode` stop, then start) during the sleep, THEN the run
    completes, and a second (tool) turn works through the same app. Uses `server` (left
    running) or a dedicated one."""
    if server is None:
        async with restartable_postgres() as own:
            return await postgres_restart_run(
                own,
                sleep_seconds=sleep_seconds,
                stop_mode=stop_mode,
                warm_connections=warm_connections,
                observed=observed,
            )
    seen = observed if observed is not None else Observed()
    async with _migrated_database(server.url()) as database_url:
        user_id, chat_id = await create_user_with_chat(database_url)
        token = token_for(user_id)
        sleeping = asyncio.Event()
        async with running_stack(
            database_url, assistants=helper_with(_tools_reporting_sleep(sleeping))
        ) as stack:
            await _warm_pool(stack, warm_connections)
            started = time.monotonic()
            seen.turns.append(await _send(stack, token, chat_id, f"/sleep {sleep_seconds:g}"))
            # The restart lands in the sleep, so the steps after it find the pool's idle
            # connections dead.
            async with asyncio.timeout(RUN_TIMEOUT_S):
                await sleeping.wait()
            seen.outage_seconds = await server.restart(stop_mode)
            seen.restarted_during_tool_step = not _step_finished(stack, "tool-")
            settled = await _settle(stack)
            seconds = time.monotonic() - started
            if settled:  # else the chat still has a job running: a second turn gets a 409
                seen.turns.append(await _send(stack, token, chat_id, "/calc 2*21"))
                await _settle(stack)
        return await _conclude(database_url, chat_id, seen, seconds, planned_turns=2)


async def pgbouncer_run(
    server_url: str | None = None,
    template: str | None = None,
    *,
    pool_size: int = 4,
    observed: Observed | None = None,
) -> Figures:
    """GIVEN the app's DATABASE_URL pointing at PgBouncer (transaction mode, `pool_size` server
    connections) in front of `server_url`'s server, WHEN a tool turn hands off and a second turn
    follows, THEN both complete and the second sees the first in its history. Migrations run
    directly against Postgres (they take advisory locks). `template` is a migrated template
    database on that server (see tests/databases.py); without one, a run makes its own."""
    if server_url is None:
        server_url = resolve_server_url()
    if template is None:
        async with migrated_template(server_url) as made:
            return await pgbouncer_run(server_url, made, pool_size=pool_size, observed=observed)
    seen = observed if observed is not None else Observed()
    async with (
        fresh_database(server_url, template) as direct_url,
        pgbouncer(server_url, pool_size=pool_size) as bouncer,
    ):
        dbname = str(conninfo_to_dict(direct_url)["dbname"])
        user_id, chat_id = await create_user_with_chat(direct_url)
        token = token_for(user_id)
        async with running_stack(bouncer.url(dbname)) as stack:
            started = time.monotonic()
            seen.turns.append(await _send(stack, token, chat_id, "/calc 2*21"))
            settled = await _settle(stack)
            seconds = time.monotonic() - started
            if settled:
                seen.turns.append(await _send(stack, token, chat_id, "thanks!"))
                await _settle(stack)
        seen.pooler_logins = _logins(bouncer.log_file, dbname)
        return await _conclude(direct_url, chat_id, seen, seconds, planned_turns=2)


@asynccontextmanager
async def _migrated_database(server_url: str) -> AsyncIterator[str]:
    name = f"handoff_fault_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        url = with_database(server_url, name)
        await migrate(url)
        yield url
    finally:
        async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
            )


async def _send(stack: Stack, token: str, chat_id: uuid.UUID, content: str) -> list[Event]:
    return await stack.respond(token, {"chatId": str(chat_id), "content": content})


async def _warm_pool(stack: Stack, connections: int) -> None:
    services: Services = stack.app.state.services
    pool = await services.pool()
    # More than the pool's maximum would wait out the checkout timeout.
    taken = [await pool.getconn() for _ in range(min(connections, pool.max_size))]
    for conn in taken:
        await pool.putconn(conn)


def _tools_reporting_sleep(sleeping: asyncio.Event) -> list[BaseTool]:
    """The demo tools, with `sleep` setting `sleeping` as it starts (then the real sleep)."""

    @tool("sleep", description=demo_sleep.description)
    async def sleep(input: str) -> str:
        sleeping.set()
        result: str = await demo_sleep.ainvoke(input)
        return result

    return [sleep if t.name == "sleep" else t for t in demo_tools()]


async def _settle(stack: Stack) -> bool:
    """Wait for the background runs to end; False when they are still going after the timeout
    (the run's figures then show the turn as lost, rather than the run raising)."""
    try:
        await stack.executor.wait_idle(RUN_TIMEOUT_S)
    except TimeoutError:
        return False
    return True


def _logins(pgbouncer_log: Path, dbname: str) -> int:
    return pgbouncer_log.read_text(errors="replace").count(f"login attempt: db={dbname} ")


def _step_finished(stack: Stack, prefix: str) -> bool:
    return any(key.startswith(prefix) for run in stack.executor.runs() for key in run.attempts)


async def _conclude(
    database_url: str, chat_id: uuid.UUID, seen: Observed, seconds: float, *, planned_turns: int
) -> Figures:
    seen.messages = await fetch(
        database_url,
        "select id, status, content from message where role = 'assistant' order by created_at",
    )
    seen.jobs = await fetch(
        database_url,
        "select id, status, root_message_id, idempotency_key from job_runs"
        " where kind <> 'quick'",  # background jobs only
    )
    seen.history = await durable_messages(database_url, chat_id)
    expected = [uuid.UUID(events[0][1]["assistantMessageId"]) for events in seen.turns]
    handoffs = sum(1 for events in seen.turns if events[-1][0] == "handoff")
    completed = {m["id"] for m in seen.messages if m["status"] == "completed"}
    return {
        "final_messages": len(completed),
        "duplicates": max(0, len(seen.messages) - len(seen.turns))
        + max(0, len(seen.jobs) - handoffs),
        # A turn never sent (an earlier one did not finish) is lost as well.
        "lost": planned_turns
        - len(seen.turns)
        + sum(1 for message_id in expected if message_id not in completed),
        "seconds": round(seconds, 3),
    }
