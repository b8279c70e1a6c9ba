"""`multitaskStrategy: steer`: a message sent while a background job runs joins that job."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.support import (
    Api,
    create_user_with_chat,
    durable_messages,
    fetch,
    in_process_app,
    running_stack,
    token_for,
    wait_for_row,
)

FINISHED_SQL = "select * from message where role = 'assistant' and status = 'completed'"
STEER = "Also, keep it short."


def message(chat_id: uuid.UUID, content: str, strategy: str = "steer") -> dict[str, str]:
    return {"chatId": str(chat_id), "content": content, "multitaskStrategy": strategy}


async def steer_during_a_tool_step(
    stack: Api, database_url: str
) -> tuple[str, uuid.UUID, list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    first = await stack.respond(token, message(chat_id, "/sleep 1", strategy="reject"))
    assert first[-1][0] == "handoff"
    # The job has claimed its turn and its tool is running.
    await wait_for_row(database_url, "select 1 from job_runs where status = 'processing'")
    steered = await stack.respond(token, message(chat_id, STEER))
    return token, chat_id, first, steered


async def test_a_steered_message_is_seen_by_the_next_round_once(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        # WHEN a message is sent with `steer` while the job's tool runs
        token, chat_id, first, steered = await steer_during_a_tool_step(stack, database_url)
        # THEN the response says it joined the running job's reply
        reply_id = first[-1][1]["assistantMessageId"]
        assert steered[0][1]["strategy"] == "steer"
        assert steered[0][1]["assistantMessageId"] == reply_id
        assert steered[-1] == (
            "handoff",
            {
                "assistantMessageId": reply_id,
                "eventId": first[-1][1]["eventId"],
                "status": "steered",
                "strategy": "steer",
            },
        )
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
        history = await stack.messages(token, chat_id)

    # AND the reply, the one reply of the turn, answers it after the tool's result
    assert message["content"].startswith("Let me use sleep for that.")
    assert message["content"].endswith(f'You said: "{STEER}"')
    # AND the thread holds it once, after the tool's result, before the answer to it
    thread = await durable_messages(database_url, chat_id)
    kinds = [type(m).__name__ for m in thread]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage", "AIMessage"]
    assert isinstance(thread[2], ToolMessage)
    assert isinstance(thread[3], HumanMessage)
    assert thread[3].content == STEER
    assert thread[3].id == steered[0][1]["userMessageId"]
    assert isinstance(thread[4], AIMessage)
    # AND the history has it once, marked as joined to the reply
    assert [m["content"] for m in history if m["role"] == "user"] == ["/sleep 1", STEER]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    [row] = await fetch(database_url, "select metadata from message where content = %s", STEER)
    assert row["metadata"]["steeredInto"] == reply_id
    assert len(await fetch(database_url, "select * from job_runs")) == 1


async def test_a_replayed_round_does_not_add_the_steered_message_twice(
    database_url: str,
) -> None:
    async with running_stack(database_url) as stack:
        # The round that takes the steered message in loses its output once: it runs again.
        stack.executor.drop_step_output("model-round-0")
        _, chat_id, first, _ = await steer_during_a_tool_step(stack, database_url)
        await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
        assert stack.handoff_run().attempts["model-round-0"] == 2
        # And a replay of the whole job afterwards changes nothing either.
        await stack.executor.replay(first[-1][1]["eventId"])
        await stack.executor.wait_idle()
    thread = await durable_messages(database_url, chat_id)
    assert [str(m.content) for m in thread if isinstance(m, HumanMessage)] == ["/sleep 1", STEER]
    [message] = await fetch(database_url, FINISHED_SQL)
    assert message["content"].count(f'You said: "{STEER}"') == 1


async def test_a_steer_while_the_quick_path_streams_is_enqueued(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url, scripted_token_delay_ms=25) as stack:
        first = asyncio.create_task(
            stack.respond(token, message(chat_id, "a first message that takes a while", "reject"))
        )
        await wait_for_row(database_url, "select 1 from message_draft")
        second = await stack.respond(token, message(chat_id, STEER))
        await first
        # THEN it says so, and runs as a turn of its own once the first one ends
        assert second[0][1]["strategy"] == "enqueue"
        assert second[-1][0] == "handoff"
        assert second[-1][1]["strategy"] == "enqueue"
        assert second[-1][1]["status"] == "queued"
        reply = second[-1][1]["assistantMessageId"]
        await wait_for_row(
            database_url, "select 1 from message where id = %s and status = 'completed'", reply
        )
        await stack.executor.wait_idle()


async def test_a_steer_into_an_idle_chat_is_an_ordinary_turn(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        events = await stack.respond(token_for(user_id), message(chat_id, "hello"))
    # An ordinary turn: no strategy applied, answered on the quick path, one job that ended
    assert "strategy" not in events[0][1]
    name, done = events[-1]
    assert name == "done"
    assert done["content"].endswith('You said: "hello"')
    rows = await fetch(
        database_url, "select role, content, status from message order by created_at"
    )
    assert [(r["role"], r["status"]) for r in rows] == [
        ("user", "completed"),
        ("assistant", "completed"),
    ]
    assert rows[1]["content"] == done["content"]
    assert [r["status"] for r in await fetch(database_url, "select status from job_runs")] == [
        "completed"
    ]
    [user] = await fetch(database_url, "select metadata from message where role = 'user'")
    assert "steeredInto" not in user["metadata"]


async def test_a_steer_into_another_users_chat_is_404(database_url: str) -> None:
    _, chat_id = await create_user_with_chat(database_url)
    stranger, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        response = await stack.respond_response(token_for(stranger), message(chat_id, "hi"))
    assert response.status_code == 404
    assert await fetch(database_url, "select * from message") == []
