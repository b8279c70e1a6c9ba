"""End to end over HTTP: quick path, handoff, background completion, history."""

from __future__ import annotations

import uuid

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from infra.store.ids import ChatId, client_message_id
from tests.support import (
    create_user_with_chat,
    durable_messages,
    fetch,
    in_process_app,
    running_stack,
    token_for,
)


async def test_tool_turn_streams_hands_off_and_completes_in_background(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        token = token_for(user_id)
        # GIVEN a new chat, WHEN the user asks for a tool
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "/calc 2*21"})

        # THEN the stream is metadata, tokens, handoff
        names = [name for name, _ in events]
        assert names[0] == "metadata"
        assert names[-1] == "handoff"
        assert names.count("token") >= 1
        assert set(names[1:-1]) == {"token"}
        meta, handoff = events[0][1], events[-1][1]
        assert meta["threadId"] == f"{chat_id}:default"
        assert handoff["assistantMessageId"] == meta["assistantMessageId"]
        assert handoff["status"] == "queued"

        # AND the background function finishes the message
        await stack.executor.wait_idle()
        [message] = await fetch(
            database_url, "select * from message where id = %s", meta["assistantMessageId"]
        )
        assert message["status"] == "completed"
        assert "42" in message["content"]
        assert message["content"].startswith("".join(d["text"] for n, d in events if n == "token"))
        assert await fetch(database_url, "select * from message_draft") == []
        [job] = await fetch(database_url, "select * from job_runs")
        assert job["status"] == "completed"
        assert job["idempotency_key"] == handoff["eventId"]
        assert job["event_sent_at"] is not None

        # AND the durable checkpoint holds the whole conversation
        history = await durable_messages(database_url, chat_id)
        assert [type(m) for m in history] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
        assert history[2].content == "42"

        # WHEN the user sends a second turn THEN the agent sees the first turn
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "thanks!"})
        assert events[-1][0] == "done"
        history = await durable_messages(database_url, chat_id)
        assert len(history) == 6
        assert history[0].content == "/calc 2*21"
        assert history[4].content == "thanks!"


async def test_plain_message_finishes_on_the_quick_path(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    message_id = uuid.uuid4()
    async with running_stack(database_url) as stack:
        events = await stack.respond(
            token_for(user_id),
            {"chatId": str(chat_id), "content": "hello there", "userMessageId": str(message_id)},
        )
        name, done = events[-1]
        assert name == "done"
        assert done["status"] == "completed"
        assert done["content"] == 'You said: "hello there"'
        assert "".join(d["text"] for n, d in events if n == "token") == done["content"]
        assert stack.executor.runs() == []
    # The turn held the chat's slot while it streamed, and let go of it: nothing went to the
    # background.
    [job] = await fetch(database_url, "select * from job_runs")
    assert (job["kind"], job["status"], job["event_sent_at"]) == ("quick", "completed", None)
    rows = await fetch(
        database_url, "select id, role, status, content from message order by created_at"
    )
    assert [(r["role"], r["status"]) for r in rows] == [
        ("user", "completed"),
        ("assistant", "completed"),
    ]
    # The client's id names the message within the chat (infra/store/ids.py).
    assert rows[0]["id"] == client_message_id(ChatId(chat_id), message_id)
    assert str(rows[0]["id"]) == events[0][1]["userMessageId"]
    assert rows[1]["content"] == done["content"]
    history = await durable_messages(database_url, chat_id)
    assert [m.content for m in history] == ["hello there", done["content"]]


async def test_assistants_in_one_chat_keep_separate_histories(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(
        database_url, assistants=["default", "calculator"]
    )
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        for assistant, content in [("default", "one"), ("calculator", "two"), ("default", "three")]:
            events = await stack.respond(
                token, {"chatId": str(chat_id), "content": content, "assistantId": assistant}
            )
            assert events[-1][0] == "done"
    helper = await durable_messages(database_url, chat_id, "default")
    calculator = await durable_messages(database_url, chat_id, "calculator")
    # Each thread holds its own turns' answers; of the other's, what the chat showed, by name.
    [one, two, _] = [
        r["content"]
        for r in await fetch(
            database_url, "select content from message where role = 'assistant' order by created_at"
        )
    ]
    assert [m.content for m in helper if isinstance(m, HumanMessage)] == [
        "one",
        "[User] two",
        f"[Calculator] {two}",
        "three",
    ]
    assert [m.content for m in calculator if isinstance(m, HumanMessage)] == [
        "[User] one",
        f"[Helper] {one}",
        "two",
    ]
    assert [m.content for m in calculator if isinstance(m, AIMessage)] == [two]
