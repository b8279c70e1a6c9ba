"""The user's wake-up reaches a waiting job however long Inngest takes to reach the app.

Each route answers 202 as soon as the database shows the job waiting, which is one step before
the run's `wait_for_event` exists; Inngest matches no event to a wait that begins after it.
These tests act the moment the route allows (not once the executor is idle) with the
executor's calls to /api/inngest delayed as Inngest Cloud's calls to a Lambda are.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest

from tests.api import ok
from tests.support import (
    Stack,
    create_user_with_chat,
    execute,
    fetch,
    running_stack,
    token_for,
    wait_for_row,
)

LATENCIES_S = [0.0, 0.05, 0.25]
FINISHED_SQL = "select * from message where role = 'assistant' and status = 'completed'"
# Far below every wait's timeout (30 minutes, 24 hours): a lost wake-up cannot pass.
PROMPTLY_S = 20.0


async def start_turn(stack: Stack, database_url: str, content: str) -> tuple[str, uuid.UUID]:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    events = await stack.respond(token, {"chatId": str(chat_id), "content": content})
    assert events[-1][0] == "handoff"
    return token, chat_id


async def finished_promptly(database_url: str) -> dict[str, Any]:
    """The completed reply, which must come within PROMPTLY_S of the wake-up."""
    woken = time.monotonic()
    async with asyncio.timeout(PROMPTLY_S):
        while not (rows := await fetch(database_url, FINISHED_SQL)):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    print(f"completed {time.monotonic() - woken:.2f} s after the wake-up")
    return rows[0]


@pytest.mark.parametrize("latency_s", LATENCIES_S)
async def test_a_resume_sent_as_soon_as_the_job_is_paused_wakes_it(
    database_url: str, latency_s: float
) -> None:
    async with running_stack(database_url) as stack:
        stack.executor.call_delay_s = latency_s
        # GIVEN a background job asked to pause
        token, chat_id = await start_turn(stack, database_url, "/calc 1+1\n/then\n/calc 2+2")
        ok(await stack.pause(token, chat_id), 202)
        # WHEN the owner resumes it the first moment the route accepts a resume
        async with asyncio.timeout(20):
            while True:
                response = await stack.resume(token, chat_id, instruction="Answer in French.")
                if response.status_code == 202:
                    break
                assert response.json()["error"]["code"] == "not_paused"
        # THEN the turn completes at once, with the instruction in its later rounds
        message = await finished_promptly(database_url)
        await stack.executor.wait_idle()
    note = "resuming it, gave this instruction for the rest of it: Answer in French."
    assert note in message["content"]
    assert "calc returned 4." in message["content"]


QUESTION = {"question": "Which city?", "options": ["Berlin", "Lisbon"], "context": ""}


@pytest.mark.parametrize("latency_s", LATENCIES_S)
async def test_an_answer_sent_as_soon_as_the_question_shows_wakes_the_job(
    database_url: str, latency_s: float
) -> None:
    async with running_stack(database_url) as stack:
        stack.executor.call_delay_s = latency_s
        # GIVEN a job whose model asks the user
        token, chat_id = await start_turn(stack, database_url, f"/ask_user {json.dumps(QUESTION)}")
        waiting = await wait_for_row(
            database_url, "select * from message where status = 'awaiting_input'"
        )
        # WHEN the owner answers the moment the question shows
        question_id = waiting["metadata"]["pendingQuestion"]["questionId"]
        ok(await stack.answer(token, chat_id, question_id, answer="Lisbon"), 202)
        # THEN the model reads the answer, and the turn completes at once
        message = await finished_promptly(database_url)
        await stack.executor.wait_idle()
    assert "ask_user returned The user answered: Lisbon." in message["content"]


EMAIL = '/send_email {"to": "ada@example.com", "subject": "Minutes", "body": "See attached."}'


@pytest.mark.parametrize("latency_s", LATENCIES_S)
async def test_an_approval_sent_as_soon_as_the_call_shows_wakes_the_job(
    database_url: str, latency_s: float
) -> None:
    async with running_stack(database_url) as stack:
        stack.executor.call_delay_s = latency_s
        # GIVEN a job whose tool call needs the user's approval
        token, chat_id = await start_turn(stack, database_url, EMAIL)
        waiting = await wait_for_row(
            database_url, "select * from message where status = 'awaiting_approval'"
        )
        # WHEN the owner approves the moment the call shows
        call_id = waiting["metadata"]["pendingApproval"]["toolCallId"]
        ok(await stack.approve(token, chat_id, call_id, approved=True), 202)
        # THEN the tool runs, and the turn completes at once
        message = await finished_promptly(database_url)
        await stack.executor.wait_idle()
    assert "Email to ada@example.com sent (simulated)" in message["content"]
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert result["content"].startswith("Email to ada@example.com sent")


async def test_an_approval_whose_event_never_reached_inngest_is_acted_on(
    database_url: str,
) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id = await start_turn(stack, database_url, EMAIL)
        waiting = await wait_for_row(
            database_url, "select * from message where status = 'awaiting_approval'"
        )
        await stack.executor.wait_idle()
        # GIVEN Inngest refusing the approval's event (an outage): the route records the
        # decision and answers 202 all the same
        stack.executor.refuse_events(5)  # every try the SDK makes
        call_id = waiting["metadata"]["pendingApproval"]["toolCallId"]
        ok(await stack.approve(token, chat_id, call_id, approved=True), 202)
        # THEN the job reads the decision when its wait ends, and the tool runs
        message = await finished_promptly(database_url)
        await stack.executor.wait_idle()
    assert "Email to ada@example.com sent (simulated)" in message["content"]


async def test_a_pause_past_its_time_ends_when_its_wait_does(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id = await start_turn(stack, database_url, "/calc 1+1")
        ok(await stack.pause(token, chat_id), 202)
        await wait_for_row(database_url, "select 1 from job_runs where status = 'paused'")
        await stack.executor.wait_idle()
        # GIVEN a pause whose time has run out, as for a run that waited the whole
        # PAUSE_TIMEOUT_S in one wait (the only one it made before the waits were several)
        await execute(
            database_url,
            "update job_runs set metadata = metadata"
            " || jsonb_build_object('pausedUntil', now() - interval '1 second')",
        )
        # WHEN that wait ends
        assert stack.executor.expire_waits() == 1
        await stack.executor.wait_idle()
        # THEN the job ends at once instead of waiting another PAUSE_TIMEOUT_S, and the chat
        # takes messages again
        assert stack.executor.waiting() == []
        [job] = await fetch(database_url, "select status from job_runs")
        assert job["status"] == "canceled"
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "hi"})
        assert events[-1][0] == "done"
