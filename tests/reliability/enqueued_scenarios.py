"""Enqueued turns under restarts: a step's output lost, or the server killed, while the turn runs.

A message sent with `multitaskStrategy: enqueue` while another turn holds the chat waits; the
background then runs its whole turn, from an opening round (`model-round-opening`) that makes
the turn's tool calls. A turn counts as lost unless its reply is the expected one and its thread
holds every one of its calls answered by the tool's stored result: none closed as "Not run"
(the text for the calls of a canceled turn), none answered twice, no message doubled.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from langchain_core.messages import HumanMessage, ToolMessage

from agent.graph import UNANSWERED_CALL_TEXT
from tests.dev_server import dev_servers, start_handoff_dev
from tests.reliability.scenarios import (
    RUN_TIMEOUT_S,
    Databases,
    Figures,
    Scenario,
    comparable,
    prepare,
    recording_tools,
)
from tests.support import (
    JWT_SECRET,
    Stack,
    create_user_with_chat,
    durable_messages,
    fetch,
    helper_with,
    parse_sse,
    running_stack,
    token_for,
    wait_for_row,
)

# Streams for most of a second at 10 ms a word: the next message arrives while it does.
FIRST_TEXT = "a first message, answered on the quick path, word by word, " + " ".join(
    f"w{i}" for i in range(60)
)
ENQUEUED_TEXT = "/record a\n/record b\n/record c"
ENQUEUED_REPLY = (
    "Let me use record for that.\n\n"
    "Here is what I found: record returned recorded a. record returned recorded b."
    " record returned recorded c."
)
ENQUEUED_JOB_SQL = "select * from job_runs where chat_id = %s and kind = 'turn'"
ENDED = " and status in ('completed', 'error')"
TOOL_RESULTS_SQL = "select tool_call_id, content, created_at from handoff.tool_results"


async def send(
    http: httpx.AsyncClient, token: str, chat_id: uuid.UUID, content: str, **body: str
) -> list[tuple[str, dict[str, Any]]]:
    payload = {"chatId": str(chat_id), "content": content, **body}
    async with http.stream(
        "POST", "/api/chat/respond", json=payload, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        raw = await response.aread()
    assert response.status_code == 200, raw
    return parse_sse(raw)


async def enqueued_figures(
    url: str, chat_id: uuid.UUID, first: str, enqueued: str, expected: str, seconds: float
) -> Figures:
    """The enqueued turn's figures: its reply, its job, its calls and what answered them."""
    [job] = await fetch(url, ENQUEUED_JOB_SQL, chat_id)
    replies = await fetch(
        url, "select * from message where chat_id = %s and role = 'assistant'", chat_id
    )
    reply = next((r for r in replies if str(r["id"]) == str(job["root_message_id"])), None)
    thread = await durable_messages(url, chat_id)
    answers = [m for m in thread if isinstance(m, ToolMessage)]
    stored = {r["tool_call_id"]: r["content"] for r in await fetch(url, TOOL_RESULTS_SQL)}
    # Every answer is its call's stored result: a tool result used, none in its stead.
    used = all(stored.get(m.tool_call_id) == m.content for m in answers)
    closed = sum(1 for m in answers if m.content == UNANSWERED_CALL_TEXT)
    said = [m.content for m in thread if isinstance(m, HumanMessage)]
    good = (
        reply is not None
        and reply["status"] == "completed"
        and reply["content"] == expected
        and job["status"] == "completed"
        and used
        and not closed
        and said == [first, enqueued]
    )
    executions = await fetch(
        url, "select count(*) as n from tool_execution_log group by tool_call_id order by n desc"
    )
    return Figures(
        final_messages=int(good),
        duplicates=max(0, len(replies) - 2)
        + (len(answers) - len({m.tool_call_id for m in answers}))
        + max(0, len(said) - 2),
        lost=1 - int(good),
        seconds=seconds,
        max_executions=int(executions[0]["n"]) if executions else 0,
    )


# --- 10. a step of an enqueued turn loses its output -----------------------------------------


async def _enqueued_turn(
    url: str, ids: tuple[uuid.UUID, uuid.UUID, uuid.UUID], drop: str | None
) -> tuple[Figures, list[tuple[Any, ...]], list[str]]:
    """A quick path streams; a turn of three calls is enqueued behind it and runs in the
    background, the only run of the executor. `drop` names that run's step whose output is
    lost once after it ran."""
    chat_id, first_id, enqueued_id = ids
    await prepare(url)
    user_id, chat_id = await create_user_with_chat(url, chat_id=chat_id)
    token = token_for(user_id)
    tools = recording_tools(url)
    async with running_stack(
        url, assistants=helper_with(tools), scripted_token_delay_ms=10
    ) as stack:
        if drop is not None:
            stack.executor.drop_step_output(drop)
        started = time.perf_counter()
        # The same chat and message ids in every database give the same tool call ids, so the
        # crash runs can name the reference run's steps.
        first = asyncio.create_task(
            send(stack.http, token, chat_id, FIRST_TEXT, userMessageId=str(first_id))
        )
        await wait_for_row(url, "select 1 from message_draft")
        queued = await send(
            stack.http,
            token,
            chat_id,
            ENQUEUED_TEXT,
            userMessageId=str(enqueued_id),
            multitaskStrategy="enqueue",
        )
        assert queued[-1][0] == "handoff", queued
        assert (await first)[-1][0] == "done"
        await _until_ended(stack, url, chat_id)
        seconds = time.perf_counter() - started
        steps = list(stack.handoff_run().attempts)
    figures = await enqueued_figures(
        url, chat_id, FIRST_TEXT, ENQUEUED_TEXT, ENQUEUED_REPLY, seconds
    )
    return figures, comparable(await durable_messages(url, chat_id)), steps


async def _until_ended(stack: Stack, url: str, chat_id: uuid.UUID) -> None:
    await wait_for_row(url, ENQUEUED_JOB_SQL + ENDED, chat_id)
    await stack.executor.wait_idle(RUN_TIMEOUT_S)


async def enqueued_crash_at_every_step(databases: Databases) -> list[Figures]:
    """A reference run names the enqueued turn's steps; then one run per step loses that
    step's output once (the opening round and each tool step among them). A run counts as
    lost unless its thread equals the reference's."""
    ids = (uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
    async with databases() as url:
        reference, messages, steps = await _enqueued_turn(url, ids, None)
    results = [reference]
    for step in steps:
        async with databases() as url:
            figures, crashed_messages, _ = await _enqueued_turn(url, ids, step)
        if crashed_messages != messages:
            figures["lost"] = 1
        results.append(figures)
    return results


# --- 11. the server is killed while an enqueued turn's tools run ------------------------------

BACKGROUND_TEXT = "/sleep 0.5"
KILLED_TEXT = "/calc 1+1\n/calc 2+2\n/sleep 2"
KILLED_REPLY = (
    "Let me use calc, sleep for that.\n\n"
    "Here is what I found: calc returned 2. calc returned 4. sleep returned slept 2s."
)


async def server_killed_during_enqueued_tools(databases: Databases) -> list[Figures]:
    """`handoff dev` is SIGKILLed while the tools of a turn enqueued behind a background job
    run, two of three stored; the next `handoff dev` runs the job afresh, and the turn goes on
    from its stored round: the two results are used, the third call runs, none is closed as
    not run. (The dev server has the demo tools only: executions are not counted.)"""
    async with databases() as url:
        await prepare(url)
        user_id, chat_id = await create_user_with_chat(url)
        started = time.perf_counter()
        before = await _kill_during_enqueued_tools(url, token_for(user_id), chat_id)
        seconds = time.perf_counter() - started
        figures = await enqueued_figures(
            url, chat_id, BACKGROUND_TEXT, KILLED_TEXT, KILLED_REPLY, seconds
        )
        after = await fetch(url, TOOL_RESULTS_SQL)
    del figures["max_executions"]
    # The results stored before the kill are kept as they were, and one more is stored.
    if any(r not in after for r in before) or len(after) != len(before) + 1:
        figures["lost"] = 1
    return [figures]


async def _kill_during_enqueued_tools(
    url: str, token: str, chat_id: uuid.UUID
) -> list[dict[str, Any]]:
    """Run the story on `handoff dev` until the enqueued job ends; the tool results stored
    when the first server was killed."""
    env = {"SUPABASE_JWT_SECRET": JWT_SECRET, "SCRIPTED_TOKEN_DELAY_MS": "1"}
    with tempfile.TemporaryDirectory(prefix="handoff-dev-test-") as data_dir:
        async with dev_servers() as servers:
            server = await start_handoff_dev(url, Path(data_dir), **env)
            servers.append(server)
            async with httpx.AsyncClient(base_url=server.origin, timeout=30) as http:
                first = await send(http, token, chat_id, BACKGROUND_TEXT)
                assert first[-1][0] == "handoff", first
                queued = await send(http, token, chat_id, KILLED_TEXT, multitaskStrategy="enqueue")
                assert queued[-1][0] == "handoff", queued
            # The first turn's sleep, then the enqueued turn's two calcs: its sleep runs.
            await wait_for_row(url, "select count(*) from handoff.tool_results having count(*) = 3")
            before = await fetch(url, TOOL_RESULTS_SQL)
            await server.kill()
            server = await start_handoff_dev(url, Path(data_dir), **env)
            servers.append(server)
            await wait_for_row(url, ENQUEUED_JOB_SQL + ENDED, chat_id)
            await server.stop()
    return before


ENQUEUED_SCENARIOS: dict[str, Scenario] = {
    "enqueued turn, crash at every step": enqueued_crash_at_every_step,
    "server killed during enqueued tools": server_killed_during_enqueued_tools,
}
