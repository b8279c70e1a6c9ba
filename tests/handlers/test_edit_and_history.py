"""Editing a message forks the thread; GET /api/chat/{chatId}/history shows the active branch, or
every branch with `all=true`."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from agent.threads import thread_config, thread_key
from infra.db import connect
from infra.store.checkpoints import durable_saver
from infra.store.drafts import DraftWriter
from infra.store.ids import ChatId, MessageId
from tests.support import (
    Api,
    create_user_with_chat,
    durable_messages,
    in_process_app,
    running_stack,
    token_for,
    wait_for_row,
)


async def say(stack: Api, token: str, chat_id: uuid.UUID, content: str, **extra: Any) -> str:
    """One turn; returns the id of the user's message."""
    events = await stack.respond(token, {"chatId": str(chat_id), "content": content, **extra})
    assert events[-1][0] in ("done", "handoff"), events
    message_id: str = events[0][1]["userMessageId"]
    return message_id


def texts(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages]


def said(messages: list[BaseMessage]) -> list[str]:
    """What the user said, in the thread's order."""
    return [str(m.content) for m in messages if isinstance(m, HumanMessage)]


async def messages_at(database_url: str, chat_id: uuid.UUID, checkpoint_id: str) -> list[str]:
    async with await connect(database_url) as conn:
        found = await durable_saver(conn).aget_tuple(
            thread_config(thread_key(chat_id, "default"), checkpoint_id=checkpoint_id)
        )
    assert found is not None
    return [str(m.content) for m in found.checkpoint["channel_values"]["messages"]]


async def test_an_edit_forks_the_thread_and_the_old_branch_stays_readable(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        # GIVEN a conversation of two turns
        await say(stack, token, chat_id, "first question")
        second = await say(stack, token, chat_id, "second question")
        old = await stack.messages(token, chat_id)
        old_head = old[-1]["checkpointId"]

        # WHEN the user edits the second question
        edited = await say(stack, token, chat_id, "second, edited", editOf=second)
        # AND goes on talking
        await say(stack, token, chat_id, "third question")
        after = await stack.messages(token, chat_id, all="true")
        active = await stack.messages(token, chat_id)
        await stack.executor.wait_idle()

    # THEN the thread continues from the edit, without the replaced turn
    assert said(await durable_messages(database_url, chat_id)) == [
        "first question",
        "second, edited",
        "third question",
    ]
    # AND the old branch is still there, in the history and in its checkpoints
    by_id = {m["id"]: m for m in after}
    assert len(after) == 8
    assert by_id[second]["stale"] is True
    assert by_id[second]["content"] == "second question"
    replaced_reply = next(m for m in after if m["parentMessageId"] == second)
    assert replaced_reply["stale"] is True
    assert by_id[edited]["editOf"] == second
    assert by_id[edited]["branchId"] == edited
    assert by_id[edited]["checkpointId"] == by_id[second]["checkpointId"]
    live = [m for m in after if not m["stale"]]
    assert [m["role"] for m in live] == ["user", "assistant"] * 3
    assert {m["branchId"] for m in live[2:]} == {edited}
    assert {m["branchId"] for m in live[:2]} == {"main"}
    # AND by default the history is the active branch: the live messages only
    assert active == live
    assert "second question" in " ".join(await messages_at(database_url, chat_id, old_head))


async def test_editing_the_first_message_starts_the_thread_again(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        first = await say(stack, token, chat_id, "hello there")
        await say(stack, token, chat_id, "and more")
        await say(stack, token, chat_id, "hi, edited", editOf=first)
    assert said(await durable_messages(database_url, chat_id)) == ["hi, edited"]


async def test_an_edit_that_names_nobody_goes_to_the_assistant_the_message_went_to(
    database_url: str,
) -> None:
    # GIVEN a chat of two assistants, its default the helper, and a message to the calculator
    user_id, chat_id = await create_user_with_chat(
        database_url, assistants=["default", "calculator"]
    )
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        asked = await say(stack, token, chat_id, "six times seven", assistantId="calculator")
        # WHEN the message is edited with no assistantId and no @-mention
        events = await stack.respond(
            token, {"chatId": str(chat_id), "content": "six times eight", "editOf": asked}
        )
        messages = await stack.messages(token, chat_id, all="true")
    # THEN the calculator answers the edit, as it answered the message, not the chat's default
    assert events[0][1]["assistantId"] == "calculator"
    assert events[-1][0] == "done"
    assert "You are Calculator." in events[-1][1]["content"]
    replies = [(m["assistantId"], m["stale"]) for m in messages if m["role"] == "assistant"]
    assert replies == [("calculator", True), ("calculator", False)]


async def test_an_edit_of_a_tool_turn_hands_off_on_the_new_branch(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        asked = await say(stack, token, chat_id, "/calc 6*7")
        await stack.executor.wait_idle()
        await say(stack, token, chat_id, "/calc 6*8", editOf=asked)
        await stack.executor.wait_idle()
        messages = await stack.messages(token, chat_id, all="true")
    live_reply = next(m for m in messages if m["role"] == "assistant" and not m["stale"])
    assert live_reply["status"] == "completed"
    assert "calc returned 48." in live_reply["content"]
    stale_reply = next(m for m in messages if m["role"] == "assistant" and m["stale"])
    assert "calc returned 42." in stale_reply["content"]
    # The reply records where its job left the thread: the head of the new branch.
    head = texts(await durable_messages(database_url, chat_id))
    assert await messages_at(database_url, chat_id, live_reply["checkpointId"]) == head


async def test_only_the_owner_edits_or_reads_the_history(database_url: str) -> None:
    owner, chat_id = await create_user_with_chat(database_url)
    stranger, stranger_chat = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        mine = await say(stack, token_for(owner), chat_id, "private words")
        response = await stack.history_response(token_for(stranger), chat_id)
        assert (response.status_code, response.json()["error"]["code"]) == (404, "chat_not_found")
        assert "private words" not in response.text
        # Another user's message id cannot be edited from the stranger's own chat.
        edit = await stack.respond_response(
            token_for(stranger), {"chatId": str(stranger_chat), "content": "x", "editOf": mine}
        )
        assert (edit.status_code, edit.json()["error"]["code"]) == (404, "message_not_found")
        # An assistant message is not a message the user can edit.
        reply = next(
            m for m in await stack.messages(token_for(owner), chat_id) if m["role"] == "assistant"
        )
        edit = await stack.respond_response(
            token_for(owner), {"chatId": str(chat_id), "content": "x", "editOf": reply["id"]}
        )
        assert edit.status_code == 404
        unauthenticated = await stack.history_response(None, chat_id)
        assert unauthenticated.status_code == 401


async def test_a_reply_in_the_background_comes_with_its_latest_draft(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "/sleep 3"})
        reply_id = events[-1][1]["assistantMessageId"]
        # GIVEN the background job has claimed the turn and written a draft of the reply (its
        # tool still runs)
        await wait_for_row(
            database_url, "select 1 from message where id = %s and status = 'streaming'", reply_id
        )
        writer = DraftWriter(
            await stack.app.state.services.pool(),
            reply_id=MessageId(uuid.UUID(reply_id)),
            chat_id=ChatId(chat_id),
        )
        await writer.start()  # after the quick path's draft, as a round does
        await writer.append("Let me use sleep for that.\n\nHere is")
        await writer.flush()
        # WHEN the page loads the history, THEN the reply carries the draft
        [_, running] = await stack.messages(token, chat_id)
        assert running["status"] == "streaming"
        assert running["draft"]["content"] == "Let me use sleep for that.\n\nHere is"
        # AND once the reply ended, no draft: its content is the answer
        await stack.executor.wait_idle()
        [_, done] = await stack.messages(token, chat_id)
    assert done["status"] == "completed"
    assert done["draft"] is None


async def test_a_reply_comes_with_its_token_usage(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        await say(stack, token, chat_id, "Hello")
        await say(stack, token, chat_id, "/calc 6*7")
        await stack.executor.wait_idle()
        [question, quick, _, handed_off] = await stack.messages(token, chat_id)
    # Each model call of the turn, and their sum: one on the quick path, two with a tool.
    assert question["usage"] is None
    assert len(quick["usage"]["rounds"]) == 1
    assert len(handed_off["usage"]["rounds"]) == 2
    for reply in (quick, handed_off):
        rounds = reply["usage"]["rounds"]
        assert reply["usage"]["input"] == sum(r["input"] for r in rounds) > 0
        assert reply["usage"]["output"] == sum(r["output"] for r in rounds) > 0
