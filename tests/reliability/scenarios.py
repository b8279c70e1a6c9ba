"""The core loop under duplicates, replays, crashes, a failed send, a vanished client, a round
past its time budget, a server killed mid-stream and a provider that answers a round run again
differently.

Each scenario runs the real stack (the app under uvicorn, the local executor driving its real
Inngest endpoint, a real Postgres) once and returns one `Figures` per turn it checked. The tests
run each scenario once; `bench/reliability.py` repeats them and prints the table.

A `record` tool logs every execution (with its tool call id) to a table, so "executed once per
tool call id" is counted, not assumed; a `database_outage` row makes every draft write fail, as
a database that refuses writes would.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import httpx
import psycopg
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool

from agent.snapshot import CUT_SHORT_TEXT, RESTARTED_TEXT, STOPPED_TEXT
from demo.tools import demo_tools
from tests.dev_server import dev_servers, start_handoff_dev
from tests.fake_providers import (
    CutStream,
    Fault,
    Reply,
    StreamError,
    ToolCall,
    Varying,
    serve_fake_providers,
)
from tests.support import (
    DRAFT_LOG_SQL,
    JWT_SECRET,
    OUTAGE_SQL,
    Stack,
    create_user_with_chat,
    durable_messages,
    fetch,
    helper_with,
    running_stack,
    token_for,
)

Databases = Callable[[], AbstractAsyncContextManager[str]]
Event = tuple[str, dict[str, Any]]

RUN_TIMEOUT_S = 60.0
DRAFT_WRITES_SQL = "select draft_content from draft_write_log order by at"

PREPARE_SQL = (
    """
create table tool_execution_log (
  tool_call_id text not null,
  input text not null,
  at timestamptz not null default clock_timestamp()
);
"""
    + OUTAGE_SQL
)


class Figures(TypedDict):
    final_messages: int  # assistant messages that ended `completed` with the expected content
    duplicates: int  # extra assistant messages, job rows or ToolMessages for the turn
    lost: int  # turns without a completed assistant message with the expected content
    seconds: float  # from sending the turn until its background work finished
    max_executions: NotRequired[int]  # most executions of any one tool call id


def recording_tools(database_url: str) -> list[BaseTool]:
    @tool("record")
    async def record(input: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Record the input and say so."""
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "insert into tool_execution_log (tool_call_id, input) values (%s, %s)",
                (tool_call_id, input),
            )
        return f"recorded {input}"

    return [*demo_tools(), record]


async def prepare(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(PREPARE_SQL)
        await conn.execute(DRAFT_LOG_SQL)


def comparable(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """Messages without their generated ids: kind, text, tool calls and answers."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        calls = tuple((c["name"], str(c["args"])) for c in getattr(m, "tool_calls", []) or [])
        answered = m.name if isinstance(m, ToolMessage) else None
        out.append((m.type, str(m.content), calls, answered))
    return out


async def turn_figures(
    database_url: str, chat_id: uuid.UUID, expected: str, seconds: float
) -> Figures:
    replies = await fetch(
        database_url,
        "select status, content from message where chat_id = %s and role = 'assistant'",
        chat_id,
    )
    # Background jobs: a turn that finished on the quick path held a `quick` job, not one of them.
    jobs = await fetch(
        database_url,
        "select status from job_runs where chat_id = %s and kind <> 'quick'",
        chat_id,
    )
    messages = await durable_messages(database_url, chat_id)
    answers = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    executions = await fetch(
        database_url,
        "select count(*) as n from tool_execution_log"
        " group by tool_call_id order by n desc limit 1",
    )
    good = sum(1 for r in replies if r["status"] == "completed" and r["content"] == expected)
    return Figures(
        final_messages=good,
        duplicates=max(0, len(replies) - 1)
        + max(0, len(jobs) - 1)
        + (len(answers) - len(set(answers))),
        lost=1 - min(good, 1),
        seconds=seconds,
        max_executions=int(executions[0]["n"]) if executions else 0,
    )


async def wait_for_job(database_url: str, chat_id: uuid.UUID, *statuses: str) -> None:
    """Until the chat's job reaches one of `statuses` (polled: the row may not exist yet)."""
    async with asyncio.timeout(RUN_TIMEOUT_S):
        while True:
            reached = await fetch(
                database_url,
                "select 1 from job_runs where chat_id = %s and status = any(%s)",
                chat_id,
                list(statuses),
            )
            if reached:
                return
            await asyncio.sleep(0.02)


def handoff_event_id(events: list[Event]) -> str:
    kind, data = events[-1]
    if kind != "handoff":
        raise AssertionError(f"expected a handoff, the stream ended with {events[-1]}")
    return str(data["eventId"])


# --- 1. duplicates and dashboard replays ------------------------------------------------------

PARALLEL_TEXT = "/record a\n/record b"
PARALLEL_REPLY = (
    "Let me use record for that.\n\n"
    "Here is what I found: record returned recorded a. record returned recorded b."
)


async def duplicate_deliveries(databases: Databases) -> list[Figures]:
    """The same event delivered 5 times at once, then replayed 3 times after completion."""
    async with databases() as url:
        await prepare(url)
        user_id, chat_id = await create_user_with_chat(url)
        async with running_stack(url, assistants=helper_with(recording_tools(url))) as stack:
            started = time.perf_counter()
            events = await stack.respond(
                token_for(user_id), {"chatId": str(chat_id), "content": PARALLEL_TEXT}
            )
            event_id = handoff_event_id(events)
            # The handler's send is delivery one; four more arrive while it runs.
            await asyncio.gather(*(stack.executor.replay(event_id) for _ in range(4)))
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            seconds = time.perf_counter() - started
            for _ in range(3):
                await stack.executor.replay(event_id)
                await stack.executor.wait_idle(RUN_TIMEOUT_S)
        return [await turn_figures(url, chat_id, PARALLEL_REPLY, seconds)]


# --- 1b. a dashboard replay of a failed job ---------------------------------------------------

TWO_ROUNDS_TEXT = "/record a\n/record b\n/then\n/record c"
TWO_ROUNDS_REPLY = (
    "Let me use record for that.\n\n"
    "So far: record returned recorded a. record returned recorded b. Next, let me use record."
    "\n\nHere is what I found: record returned recorded c."
)


async def replay_after_failure(databases: Databases) -> list[Figures]:
    """The database refuses the first model round's writes through every retry, so the job
    fails after both of the round's tools ran; once it is back, a replay resumes from the
    durable checkpoint and runs only what never succeeded: no tool runs again. (A tool that
    fails through every retry does not fail the job: the model is told.)"""
    async with databases() as url:
        await prepare(url)
        await fetch(url, "insert into database_outage default values returning since")
        user_id, chat_id = await create_user_with_chat(url)
        async with running_stack(url, assistants=helper_with(recording_tools(url))) as stack:
            started = time.perf_counter()
            events = await stack.respond(
                token_for(user_id), {"chatId": str(chat_id), "content": TWO_ROUNDS_TEXT}
            )
            event_id = handoff_event_id(events)
            await wait_for_job(url, chat_id, "error")
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            await fetch(url, "delete from database_outage returning since")
            await stack.executor.replay(event_id)
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            seconds = time.perf_counter() - started
        return [await turn_figures(url, chat_id, TWO_ROUNDS_REPLY, seconds)]


# --- 2. a crash after every step, before its result is memoized -------------------------------


async def _two_round_turn(
    url: str, chat_id: uuid.UUID, user_message_id: uuid.UUID, drop: str | None
) -> tuple[Figures, list[tuple[Any, ...]], list[str], list[int]]:
    """One two-round turn; `drop` names the step whose output is lost once after it ran."""
    await prepare(url)
    user_id, chat_id = await create_user_with_chat(url, chat_id=chat_id)
    async with running_stack(url, assistants=helper_with(recording_tools(url))) as stack:
        if drop is not None:
            stack.executor.drop_step_output(drop)
        started = time.perf_counter()
        await stack.respond(
            token_for(user_id),
            {
                "chatId": str(chat_id),
                "content": TWO_ROUNDS_TEXT,
                # The same chat and message id in every database give the same tool call
                # ids, so the crash runs can name the reference run's steps.
                "userMessageId": str(user_message_id),
            },
        )
        await wait_for_job(url, chat_id, "completed", "error")
        await stack.executor.wait_idle(RUN_TIMEOUT_S)
        seconds = time.perf_counter() - started
        steps = _steps(stack)
    figures = await turn_figures(url, chat_id, TWO_ROUNDS_REPLY, seconds)
    seqs = [r["seq"] for r in await fetch(url, "select seq from draft_write_log order by at")]
    return figures, comparable(await durable_messages(url, chat_id)), steps, seqs


def _steps(stack: Stack) -> list[str]:
    run = stack.handoff_run()
    return list(run.attempts)


async def crash_at_every_step(databases: Databases) -> list[Figures]:
    """A reference run names the steps; then one run per step loses that step's output once.
    A run counts as lost unless its final content and durable messages equal the reference's
    and its draft `seq` never went backwards."""
    chat_id, user_message_id = uuid.uuid4(), uuid.uuid4()
    async with databases() as url:
        reference, messages, steps, _ = await _two_round_turn(url, chat_id, user_message_id, None)
    results = [reference]
    for step in steps:
        async with databases() as url:
            figures, crashed_messages, _, seqs = await _two_round_turn(
                url, chat_id, user_message_id, step
            )
        if crashed_messages != messages or seqs != sorted(set(seqs)):
            figures["lost"] = 1
        results.append(figures)
    return results


# --- 3. the outbox: the event send fails after the commit -------------------------------------


async def outbox_resend(databases: Databases) -> list[Figures]:
    """Inngest refuses every try of the handler's send; the relay's re-send completes the job,
    and a second relay pass finds nothing left to send."""
    async with databases() as url:
        await prepare(url)
        user_id, chat_id = await create_user_with_chat(url)
        async with running_stack(
            url, assistants=helper_with(recording_tools(url)), outbox_grace_s=0
        ) as stack:
            stack.executor.refuse_events(5)  # every try the SDK makes
            started = time.perf_counter()
            events = await stack.respond(
                token_for(user_id), {"chatId": str(chat_id), "content": PARALLEL_TEXT}
            )
            handoff_event_id(events)
            unsent = await fetch(
                url, "select 1 from job_runs where event_sent_at is null and kind <> 'quick'"
            )
            relay = f"{stack.settings.inngest_app_id}-outbox-relay"
            stack.executor.fire(relay)
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            seconds = time.perf_counter() - started
            stack.executor.fire(relay)
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            resent = [r.output for r in stack.executor.runs() if r.function_id == relay]
        figures = await turn_figures(url, chat_id, PARALLEL_REPLY, seconds)
        if len(unsent) != 1 or resent != [{"resent": 1}, {"resent": 0}]:
            figures["lost"] = 1
        return [figures]


# --- 5. the client goes away mid-stream -------------------------------------------------------


async def client_disconnect(databases: Databases) -> list[Figures]:
    """The client reads the first token and hangs up; the turn is still handed off and done."""
    async with databases() as url:
        await prepare(url)
        user_id, chat_id = await create_user_with_chat(url)
        async with running_stack(
            url, assistants=helper_with(recording_tools(url)), scripted_token_delay_ms=20
        ) as stack:
            started = time.perf_counter()
            async with stack.http.stream(
                "POST",
                "/api/chat/respond",
                json={"chatId": str(chat_id), "content": PARALLEL_TEXT},
                headers={"Authorization": f"Bearer {token_for(user_id)}"},
            ) as response:
                async for line in response.aiter_lines():
                    if line.startswith("event: token"):
                        break
            await wait_for_job(url, chat_id, "completed", "error")
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            seconds = time.perf_counter() - started
        return [await turn_figures(url, chat_id, PARALLEL_REPLY, seconds)]


# --- 6. a background round past its time budget ------------------------------------------------

# The round after the tool quotes its 60 words, ~1.2 s at 20 ms a word: past a 0.3 s budget.
LONG_RECORD_TEXT = "/record " + " ".join(f"w{i}" for i in range(60))


async def round_past_budget(databases: Databases) -> list[Figures]:
    """A round streams past its budget: it stops there and the job completes, every step once,
    the reply being what the round showed and a plain note; no draft ever shows less."""
    async with databases() as url:
        await prepare(url)
        user_id, chat_id = await create_user_with_chat(url)
        async with running_stack(
            url,
            assistants=helper_with(recording_tools(url)),
            scripted_token_delay_ms=20,
            round_budget_s=0.3,
        ) as stack:
            started = time.perf_counter()
            events = await stack.respond(
                token_for(user_id), {"chatId": str(chat_id), "content": LONG_RECORD_TEXT}
            )
            handoff_event_id(events)
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            seconds = time.perf_counter() - started
            once = set(stack.handoff_run().attempts.values()) == {1}
        [reply] = await fetch(
            url, "select * from message where chat_id = %s and role = 'assistant'", chat_id
        )
        lengths = [len(w["draft_content"]) for w in await fetch(url, DRAFT_WRITES_SQL)]
        shown, _, note = reply["content"].rpartition("\n\n")
        good = (
            reply["status"] == "completed"
            and note == CUT_SHORT_TEXT["time"]
            and shown.startswith("Let me use record for that.\n\nHere is what I found:")
            and lengths == sorted(lengths)
            and once
        )
        figures = await turn_figures(url, chat_id, reply["content"], seconds)
        return [{**figures, "final_messages": int(good), "lost": 1 - int(good)}]


# --- 7. the server dies while the quick path streams ---------------------------------------------

LONG_TEXT = " ".join(f"word{i}" for i in range(60))  # echoed word by word: ~2.4 s at 40 ms
ONE_RECORD_REPLY = (
    "Let me use record for that.\n\nHere is what I found: record returned recorded a."
)


async def quick_path_killed(databases: Databases) -> list[Figures]:
    """The process streaming a quick path is killed: after the lease its reply holds what it
    showed and a plain note, in `error`, and the chat answers the next message."""
    async with databases() as url:
        await prepare(url)
        user_id, chat_id = await create_user_with_chat(url)
        token = token_for(user_id)
        env = {
            "SUPABASE_JWT_SECRET": JWT_SECRET,
            "SCRIPTED_TOKEN_DELAY_MS": "40",
            "TURN_LEASE_S": "1",
        }
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="handoff-dev-test-") as data_dir:
            async with dev_servers() as servers:
                server = await start_handoff_dev(url, Path(data_dir), **env)
                servers.append(server)
                body = {"chatId": str(chat_id), "content": LONG_TEXT}
                headers = {"Authorization": f"Bearer {token}"}
                async with (
                    httpx.AsyncClient(base_url=server.origin) as http,
                    http.stream("POST", "/api/chat/respond", json=body, headers=headers) as r,
                ):
                    tokens = 0
                    async for line in r.aiter_lines():
                        tokens += line.startswith("event: token")
                        if tokens == 10:
                            break
                await server.kill()
        async with running_stack(
            url, assistants=helper_with(recording_tools(url)), turn_lease_s=1
        ) as stack:
            await asyncio.sleep(1.1)
            events = await stack.respond(token, {"chatId": str(chat_id), "content": "/record a"})
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
        seconds = time.perf_counter() - started
        handoff_event_id(events)
        replies = await fetch(
            url,
            "select status, content from message where chat_id = %s and role = 'assistant'"
            " order by created_at",
            chat_id,
        )
        expected = [
            "error",
            "completed",
        ]
        good = (
            [r["status"] for r in replies] == expected
            and replies[0]["content"].startswith('You said: "word0')
            and replies[0]["content"].endswith(f"\n\n{STOPPED_TEXT}")
            and replies[1]["content"] == ONE_RECORD_REPLY
        )
        executions = await fetch(url, "select count(*) as n from tool_execution_log")
        return [
            Figures(
                final_messages=int(good),
                duplicates=max(0, len(replies) - 2),
                lost=1 - int(good),
                seconds=seconds,
                max_executions=int(executions[0]["n"]),
            )
        ]


# --- 8. a tool output larger than a step may carry --------------------------------------------


async def large_tool_output(databases: Databases) -> list[Figures]:
    """A tool returns 3 MB and no bucket is set: the output is cut short with a note the model
    and the user see, within Inngest's limits, and the turn completes once."""
    async with databases() as url:
        await prepare(url)
        user_id, chat_id = await create_user_with_chat(url)
        async with running_stack(url, assistants=helper_with(recording_tools(url))) as stack:
            started = time.perf_counter()
            events = await stack.respond(
                token_for(user_id), {"chatId": str(chat_id), "content": "/report 3000"}
            )
            handoff_event_id(events)
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            seconds = time.perf_counter() - started
            completed = stack.handoff_run().status == "completed"
        [reply] = await fetch(
            url, "select * from message where chat_id = %s and role = 'assistant'", chat_id
        )
        [progress] = reply["metadata"]["snapshot"]["progress"]
        good = (
            completed
            and reply["status"] == "completed"
            and "only the first" in reply["content"]
            and bool(progress.get("note"))
        )
        figures = await turn_figures(url, chat_id, reply["content"], seconds)
        del figures["max_executions"]  # (the report tool keeps no log of its runs)
        return [{**figures, "final_messages": int(good), "lost": 1 - int(good)}]


# --- 9. one user sends more turns at once than they may have running ---------------------------

BURST = 8
MAX_ACTIVE = 3


async def one_users_burst(databases: Databases) -> list[Figures]:
    """One user sends a turn to each of 8 chats at once, with 3 allowed to run: 3 are answered
    whole, 5 get 429 and leave nothing stored, and no answer is lost or doubled."""
    async with databases() as url:
        await prepare(url)
        user_id, first_chat = await create_user_with_chat(url)
        chats = [first_chat]
        for _ in range(BURST - 1):
            chat_id = uuid.uuid4()
            await fetch(
                url,
                "insert into public.chat (id, user_id, title) values (%s, %s, 'burst')"
                " returning id",
                chat_id,
                user_id,
            )
            chats.append(chat_id)
        token = token_for(user_id)
        async with running_stack(
            url, assistants=helper_with(recording_tools(url)), max_active_turns_per_user=MAX_ACTIVE
        ) as stack:
            started = time.perf_counter()

            async def send(chat_id: uuid.UUID) -> int:
                body = {"chatId": str(chat_id), "content": "/record a"}
                headers = {"Authorization": f"Bearer {token}"}
                async with stack.http.stream(
                    "POST", "/api/chat/respond", json=body, headers=headers
                ) as response:
                    await response.aread()
                    return response.status_code

            statuses = await asyncio.gather(*(send(c) for c in chats))
            await stack.executor.wait_idle(RUN_TIMEOUT_S)
            seconds = time.perf_counter() - started
        admitted = [c for c, code in zip(chats, statuses, strict=True) if code == 200]
        refused = [c for c, code in zip(chats, statuses, strict=True) if code == 429]
        replies = await fetch(
            url, "select chat_id, status, content from message where role = 'assistant'"
        )
        left = await fetch(
            url, "select 1 from message where chat_id = any(%s)", [str(c) for c in refused]
        )
        done = sum(
            1 for r in replies if (r["status"], r["content"]) == ("completed", ONE_RECORD_REPLY)
        )
        executions = await fetch(
            url,
            "select count(*) as n from tool_execution_log"
            " group by tool_call_id order by n desc limit 1",
        )
        good = (
            len(admitted) == MAX_ACTIVE
            and len(refused) == BURST - MAX_ACTIVE
            and done == MAX_ACTIVE
            and not left
        )
        return [
            Figures(
                final_messages=done,
                duplicates=max(0, len(replies) - len(admitted)),
                lost=(len(admitted) - done) + len(left) + (0 if good else 1),
                seconds=seconds,
                max_executions=int(executions[0]["n"]) if executions else 0,
            )
        ]


# --- 10. a round run again after a mid-stream failure, answered differently --------------------

# Through langchain-openai: the round's first answer breaks off after 12 words, one way or
# another, and the attempt that runs it again is answered in other words.
MID_STREAM_FAULTS: tuple[Fault, ...] = (CutStream(after=12), StreamError(after=12))


async def round_answered_anew(databases: Databases) -> list[Figures]:
    """For each fault, one turn: the page's drafts only ever grow, and the stored reply starts
    with the last of them, saying that the answer started over: never silently different."""
    figures: list[Figures] = []
    for fault in MID_STREAM_FAULTS:
        async with databases() as url, serve_fake_providers() as fake:
            await prepare(url)
            user_id, chat_id = await create_user_with_chat(url)
            async with running_stack(
                url,
                assistants=helper_with(recording_tools(url)),
                model="openai:gpt-4o-mini",
                openai_base_url=fake.openai_base_url,
                openai_api_key="test-key",
            ) as stack:
                first = Reply(
                    text=["Let me record it."], tool_calls=[ToolCall("record", {"input": "a"})]
                )
                fake.vary(Varying(first=first, faults={1: fault}, chunk_delay_ms=20))
                started = time.perf_counter()
                events = await stack.respond(
                    token_for(user_id), {"chatId": str(chat_id), "content": "Note a."}
                )
                handoff_event_id(events)
                await stack.executor.wait_idle(RUN_TIMEOUT_S)
                seconds = time.perf_counter() - started
            [reply] = await fetch(
                url, "select * from message where chat_id = %s and role = 'assistant'", chat_id
            )
            drafts = [w["draft_content"] for w in await fetch(url, DRAFT_WRITES_SQL)]
            shown = [*drafts, reply["content"]]
            good = (
                reply["status"] == "completed"
                and len(drafts) > 1
                and all(later.startswith(earlier) for earlier, later in pairwise(shown))
                and RESTARTED_TEXT in reply["content"]
            )
            turn = await turn_figures(url, chat_id, reply["content"], seconds)
            figures.append({**turn, "final_messages": int(good), "lost": 1 - int(good)})
    return figures


Scenario = Callable[[Databases], Awaitable[list[Figures]]]

SCENARIOS: dict[str, Scenario] = {
    "duplicate deliveries + replays": duplicate_deliveries,
    "replay after failure": replay_after_failure,
    "crash at every step": crash_at_every_step,
    "outbox re-send": outbox_resend,
    "client disconnect": client_disconnect,
    "round past its budget": round_past_budget,
    "server killed mid-stream": quick_path_killed,
    "3 MB tool output, no bucket": large_tool_output,
    "one user's burst past the limit": one_users_burst,
    "round answered anew after a mid-stream failure": round_answered_anew,
}
