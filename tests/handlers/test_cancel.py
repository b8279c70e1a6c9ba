"""POST /api/chat/{chatId}/cancel: the job stops, the message keeps what the user saw."""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage

from tests.api import ok
from tests.support import (
    create_user_with_chat,
    durable_messages,
    fetch,
    in_process_app,
    running_stack,
    token_for,
    wait_for_row,
)

# The reply's first tool call, in the progress Realtime subscribers and the history show.
CALL_STATUS_SQL = (
    "select 1 from message where role = 'assistant'"
    " and metadata #>> '{{snapshot,progress,0,status}}' = '{status}'"
)


async def test_cancel_during_a_slow_tool_ends_the_message_with_what_was_shown(
    database_url: str,
) -> None:
    # GIVEN a turn handed off to a tool that takes a while
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "/sleep 1.5"})
        assert events[-1][0] == "handoff"
        shown = "".join(data["text"] for name, data in events if name == "token")
        await wait_for_row(database_url, "select 1 from job_runs where status = 'processing'")
        await wait_for_row(database_url, CALL_STATUS_SQL.format(status="pending"))

        # WHEN the user cancels while the tool runs
        response = await stack.cancel(token, chat_id)

        # THEN it is accepted at once and the message and job are settled before the run ends
        assert ok(response, 202) == {
            "canceled": True,
            "assistantMessageId": events[-1][1]["assistantMessageId"],
        }
        [message] = await fetch(database_url, "select * from message where role = 'assistant'")
        assert message["status"] == "canceled"
        assert message["content"] == shown
        # AND its tool call shows as stopped, not as running for ever
        assert await fetch(database_url, CALL_STATUS_SQL.format(status="stopped"))
        await stack.executor.wait_idle()
        run = stack.handoff_run()

    # AND the run stopped before any model round: no answer was streamed or stored after it
    assert not any(name.startswith("model-round") for name in run.attempts)
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert (message["status"], message["content"]) == ("canceled", shown)
    assert [c["status"] for c in message["metadata"]["snapshot"]["progress"]] == ["stopped"]
    [job] = await fetch(database_url, "select status from job_runs")
    assert job["status"] == "canceled"
    assert await fetch(database_url, "select * from message_draft") == []
    history = await durable_messages(database_url, chat_id)
    assert not any(isinstance(m, ToolMessage) for m in history)


async def test_cancel_while_the_answer_streams_keeps_the_partial_draft(database_url: str) -> None:
    # GIVEN a background round that streams slowly into its draft
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url, scripted_token_delay_ms=40) as stack:
        await stack.respond(token, {"chatId": str(chat_id), "content": "/report 1"})
        draft = await wait_for_row(
            database_url,
            "select * from message_draft where strpos(draft_content, 'Here is what I found') > 0",
        )

        # WHEN the user cancels half-way through the answer
        assert ok(await stack.cancel(token, chat_id), 202)["canceled"] is True
        await stack.executor.wait_idle()

    # THEN the message keeps a partial answer, which no later draft write replaced
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "canceled"
    assert message["content"].startswith(draft["draft_content"])
    assert "Here is what I found" in message["content"]
    assert await fetch(database_url, "select * from message_draft") == []
    [job] = await fetch(database_url, "select status from job_runs")
    assert job["status"] == "canceled"
    # AND the thread holds no answer the user never saw: the canceled round was not saved
    history = await durable_messages(database_url, chat_id)
    assert isinstance(history[-1], AIMessage)
    assert history[-1].tool_calls


async def test_a_new_turn_runs_after_a_cancel(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        await stack.respond(token, {"chatId": str(chat_id), "content": "/sleep 1"})
        assert (await stack.cancel(token, chat_id)).status_code == 202
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "hello again"})
        await stack.executor.wait_idle()
    assert events[-1][0] == "done"
    assert "hello again" in events[-1][1]["content"]


async def test_canceling_an_idle_chat_is_harmless(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        await stack.respond(token, {"chatId": str(chat_id), "content": "hi"})
        idle = {"canceled": False, "assistantMessageId": None}
        assert ok(await stack.cancel(token, chat_id), 202) == idle
        assert ok(await stack.cancel(token, chat_id, assistantId="calculator"), 202) == idle
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"


async def test_only_the_owner_can_cancel(database_url: str) -> None:
    owner, chat_id = await create_user_with_chat(database_url)
    stranger, _ = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        await stack.respond(token_for(owner), {"chatId": str(chat_id), "content": "/sleep 0.5"})
        body = ok(await stack.cancel(token_for(stranger), chat_id), 404)
        assert body["error"]["code"] == "chat_not_found"
        unauthenticated = await stack.cancel(None, chat_id)
        assert unauthenticated.status_code == 401
        bad = await stack.cancel(token_for(owner), chat_id, assistantId="no:colons")
        assert bad.status_code == 422
        await stack.executor.wait_idle()
    [job] = await fetch(database_url, "select status from job_runs")
    assert job["status"] == "completed"
