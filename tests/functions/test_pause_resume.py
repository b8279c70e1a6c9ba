"""Pause and resume: a paused job stops between two steps, keeps its chat, and goes on when
resumed, with the user's instruction in every later model round."""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
from langchain_core.tools import BaseTool, tool

from agent.threads import thread_config, thread_key
from infra.db import connect
from infra.store.checkpoints import durable_saver
from tests.api import ok
from tests.support import (
    Stack,
    create_user_with_chat,
    durable_messages,
    execute,
    fetch,
    helper_with,
    running_stack,
    sit_out_waits,
    token_for,
    wait_for_row,
)


async def durable_values(database_url: str, chat_id: uuid.UUID, key: str) -> Any:
    """A value of the thread's latest durable checkpoint."""
    async with await connect(database_url) as conn:
        latest = await durable_saver(conn).aget_tuple(thread_config(thread_key(chat_id, "default")))
    assert latest is not None
    return latest.checkpoint["channel_values"].get(key)


PAUSED_SQL = """
select m.status as message_status, j.status as job_status from message m
join job_runs j on j.root_message_id = m.id
where m.role = 'assistant' and m.status = 'paused' and j.status = 'paused'
"""
FINISHED_SQL = "select * from message where role = 'assistant' and status = 'completed'"


async def paused_turn(stack: Stack, database_url: str, content: str) -> tuple[str, uuid.UUID]:
    """A turn handed to the background, then paused: (token, chat id)."""
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    events = await stack.respond(token, {"chatId": str(chat_id), "content": content})
    assert events[-1][0] == "handoff"
    body = ok(await stack.pause(token, chat_id), 202)
    assert body["pausing"] is True
    assert body["assistantMessageId"] == events[-1][1]["assistantMessageId"]
    await wait_for_row(database_url, PAUSED_SQL)
    await stack.executor.wait_idle()
    return token, chat_id


async def test_resume_with_an_instruction_that_every_later_round_gets(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        # GIVEN a job paused before its first model round (before or after its first tool
        # step: the pause may come before or after the job's claim), with two rounds ahead
        token, chat_id = await paused_turn(stack, database_url, "/calc 1+1\n/then\n/calc 2+2")
        [wait] = stack.executor.waiting()
        assert wait.event == "chat/resume"
        # The owner sees it paused, in the history too.
        assert (await stack.messages(token, chat_id))[-1]["status"] == "paused"
        # While paused the chat is still taken.
        response = await stack.respond_response(
            token, {"chatId": str(chat_id), "content": "hello?"}
        )
        assert response.status_code == 409

        # WHEN the owner resumes it with an instruction
        resumed = await stack.resume(token, chat_id, instruction="Answer in French.")
        assert ok(resumed, 202)["resumed"] is True
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()

    # THEN both later rounds' model input had the instruction (the scripted model echoes a
    # system note), and the thread's state keeps it
    note = "resuming it, gave this instruction for the rest of it: Answer in French."
    assert message["content"].count(note) == 2, message["content"]
    assert "calc returned 4." in message["content"]
    [job] = await fetch(database_url, "select * from job_runs")
    assert job["status"] == "completed"
    assert "pauseRequested" not in job["metadata"]
    assert await durable_values(database_url, chat_id, "instruction") == "Answer in French."


def sleep_that_says_it_began(database_url: str) -> BaseTool:
    """A `sleep` tool that writes a row of `tool_began` as it begins: a pause sent once that
    row is there comes while the tool runs, not before its step (when the claim would take it,
    and no tool would run)."""

    @tool
    def sleep(input: str) -> str:
        """Wait for the given number of seconds."""
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("insert into tool_began default values")
        time.sleep(float(input))
        return f"slept {float(input):g}s"

    return sleep


async def test_pause_between_a_tool_step_and_the_next_round(database_url: str) -> None:
    await execute(database_url, "create table tool_began (at timestamptz default now())")
    assistants = helper_with([sleep_that_says_it_began(database_url)])
    async with running_stack(database_url, assistants=assistants) as stack:
        user_id, chat_id = await create_user_with_chat(database_url)
        token = token_for(user_id)
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "/sleep 0.5"})
        assert events[-1][0] == "handoff"
        # WHEN the pause comes while the tool runs
        await wait_for_row(database_url, "select 1 from tool_began")
        ok(await stack.pause(token, chat_id), 202)
        await wait_for_row(database_url, PAUSED_SQL)
        await stack.executor.wait_idle()
        # THEN the tool's step finished, and no model round ran after it
        [result] = await fetch(database_url, "select * from handoff.tool_results")
        assert result["content"] == "slept 0.5s"
        assert not any(
            str(m.content).startswith("Here is")
            for m in await durable_messages(database_url, chat_id)
        )
        # AND a resume without instruction finishes the turn as it would have
        ok(await stack.resume(token, chat_id), 202)
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
    assert message["content"].endswith("Here is what I found: sleep returned slept 0.5s.")
    assert "Noted" not in message["content"]


async def test_cancel_while_paused_ends_the_wait(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id = await paused_turn(stack, database_url, "/calc 1+1")
        ok(await stack.cancel(token, chat_id), 202)
        await stack.executor.wait_idle()
        assert stack.executor.waiting() == []
        assert ok(await stack.resume(token, chat_id), 409)["error"]["code"] == "not_paused"
        run = stack.handoff_run()
    assert run.status == "cancelled"
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "canceled"
    # No model round ran after the pause.
    assert "Here is what I found" not in message["content"]


async def test_a_pause_never_resumed_ends_and_frees_the_chat(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id = await paused_turn(stack, database_url, "/calc 1+1")
        assert await sit_out_waits(stack.executor) > 1
        [job] = await fetch(database_url, "select status from job_runs")
        assert job["status"] == "canceled"
        [message] = await fetch(database_url, "select * from message where role = 'assistant'")
        assert message["status"] == "canceled"
        # The chat takes messages again.
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "hi"})
        assert events[-1][0] == "done"


async def test_pause_and_resume_answer_only_the_owner_and_only_when_they_apply(
    database_url: str,
) -> None:
    async with running_stack(database_url) as stack:
        user_id, chat_id = await create_user_with_chat(database_url)
        token = token_for(user_id)
        # Nothing runs: nothing to pause or resume.
        assert ok(await stack.pause(token, chat_id), 409)["error"]["code"] == "nothing_running"
        assert ok(await stack.resume(token, chat_id), 409)["error"]["code"] == "not_paused"

        token, chat_id = await paused_turn(stack, database_url, "/calc 1+1")
        # Paused already: no second pause.
        assert ok(await stack.pause(token, chat_id), 409)["error"]["code"] == "nothing_running"
        stranger, stranger_chat = await create_user_with_chat(database_url)
        for action in (stack.pause, stack.resume):
            theirs = await action(token_for(stranger), chat_id)
            assert ok(theirs, 404)["error"]["code"] == "chat_not_found"
            ok(await action(token_for(stranger), stranger_chat), 409)
            ok(await action(None, chat_id), 401)
        for bad in ({"instruction": 3}, {"instruction": "x" * 5000}, {"surprise": 1}):
            refused = await stack.resume(token, chat_id, **bad)
            assert ok(refused, 422)["error"]["code"] == "invalid_request", bad
        # Still paused, still the owner's to resume.
        [job] = await fetch(database_url, "select status from job_runs where chat_id = %s", chat_id)
        assert job["status"] == "paused"
        ok(await stack.resume(token, chat_id), 202)
        await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
