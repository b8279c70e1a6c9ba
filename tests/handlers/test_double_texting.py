"""A message sent while another turn of the chat runs: reject, interrupt or enqueue.

Each race fires two requests together. The scripted model streams slowly enough that the first
turn still holds the chat's slot when the second one arrives.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent.graph import UNANSWERED_CALL_TEXT
from tests.api import sse
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

# Slow enough that the first turn still streams when the second request arrives.
SLOW_TOKENS_MS = 25


def turn(chat_id: uuid.UUID, content: str, strategy: str) -> dict[str, str]:
    return {"chatId": str(chat_id), "content": content, "multitaskStrategy": strategy}


def ending(reply: httpx.Response) -> str:
    if reply.status_code != 200:
        return str(reply.status_code)
    name, data = sse(reply)[-1]
    return f"{name}:{data.get('code', data.get('status'))}"


def said(history: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in history if isinstance(m, HumanMessage)]


async def race(
    stack: Api, token: str, chat_id: uuid.UUID, strategy: str
) -> tuple[httpx.Response, httpx.Response]:
    first = asyncio.create_task(
        stack.respond_response(
            token, turn(chat_id, "the first message, which takes a while", strategy)
        )
    )
    await asyncio.sleep(0)  # the first request goes out first, the second right behind it
    second = asyncio.create_task(
        stack.respond_response(token, turn(chat_id, "the second message", strategy))
    )
    return await first, await second


async def test_reject_race_one_answer_and_one_409(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with in_process_app(database_url, scripted_token_delay_ms=SLOW_TOKENS_MS) as stack:
        replies = await race(stack, token_for(user_id), chat_id, "reject")
    assert sorted(ending(r) for r in replies) == ["409", "done:completed"]
    rejected = next(r for r in replies if r.status_code == 409)
    assert rejected.json()["error"]["code"] == "job_in_progress"
    # The rejected message was not stored: the client still has it to send again.
    users = await fetch(database_url, "select content from message where role = 'user'")
    assert len(users) == 1
    assert said(await durable_messages(database_url, chat_id)) == [users[0]["content"]]


async def test_interrupt_race_the_later_message_wins_and_turns_never_mix(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with in_process_app(database_url, scripted_token_delay_ms=SLOW_TOKENS_MS) as stack:
        first, second = await race(stack, token_for(user_id), chat_id, "interrupt")
    # Whichever took the slot last answers; the other stops where it was.
    assert sorted([ending(first), ending(second)]) == ["done:completed", "error:interrupted"]
    winner, loser = (first, second) if ending(first) == "done:completed" else (second, first)
    winner_id = sse(winner)[0][1]["assistantMessageId"]
    loser_id = sse(loser)[0][1]["assistantMessageId"]
    shown = "".join(d["text"] for n, d in sse(loser) if n == "token")
    [stopped] = await fetch(database_url, "select * from message where id = %s", loser_id)
    assert (stopped["status"], stopped["content"]) == ("canceled", shown)
    [answered] = await fetch(database_url, "select * from message where id = %s", winner_id)
    assert answered["status"] == "completed"
    # The thread holds the winning turn alone, whole.
    history = await durable_messages(database_url, chat_id)
    assert len(said(history)) == 1
    assert [type(m) for m in history] == [HumanMessage, AIMessage]
    jobs = await fetch(database_url, "select status from job_runs order by created_at")
    assert sorted(j["status"] for j in jobs) == ["canceled", "completed"]


async def test_interrupt_stops_a_background_job_and_answers_its_open_calls(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        # GIVEN a tool turn running in the background
        started = await stack.respond_response(token, turn(chat_id, "/sleep 1.5", "reject"))
        assert ending(started) == "handoff:queued"
        await wait_for_row(database_url, "select 1 from job_runs where status = 'processing'")
        # WHEN the user sends another message with `interrupt`
        reply = await stack.respond_response(token, turn(chat_id, "never mind", "interrupt"))
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    # THEN the new message is answered, the background job stopped before its next round
    assert ending(reply) == "done:completed"
    assert run.status == "cancelled"
    assert not any(step.startswith("model-round") for step in run.attempts)
    replies = await fetch(
        database_url, "select status from message where role = 'assistant' order by created_at"
    )
    assert [r["status"] for r in replies] == ["canceled", "completed"]
    # AND the thread answers the call that never ran before the new message, as providers need
    history = await durable_messages(database_url, chat_id)
    assert [type(m) for m in history] == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        HumanMessage,
        AIMessage,
    ]
    assert history[2].content == UNANSWERED_CALL_TEXT


async def test_enqueue_race_both_turns_run_one_after_the_other(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, scripted_token_delay_ms=SLOW_TOKENS_MS) as stack:
        first, second = await race(stack, token_for(user_id), chat_id, "enqueue")
        assert sorted([ending(first), ending(second)]) == ["done:completed", "handoff:queued"]
        await wait_for_row(
            database_url,
            "select 1 from job_runs where kind = 'turn' and status = 'completed'",
        )
        await stack.executor.wait_idle()
    replies = await fetch(
        database_url, "select id, status, content, metadata from message where role = 'assistant'"
    )
    assert [r["status"] for r in replies] == ["completed", "completed"]
    # The waiting turn ran after the first one, on top of it: the thread holds both, in order.
    history = await durable_messages(database_url, chat_id)
    assert [type(m) for m in history] == [HumanMessage, AIMessage, HumanMessage, AIMessage]
    waited = first if ending(first) == "handoff:queued" else second
    waited_id = uuid.UUID(sse(waited)[0][1]["assistantMessageId"])
    [queued_reply] = [r for r in replies if r["id"] == waited_id]
    assert history[3].content == queued_reply["content"]
    assert queued_reply["metadata"]["checkpointId"] is not None


async def test_enqueue_behind_a_background_job_runs_when_it_finishes(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        assert (
            ending(await stack.respond_response(token, turn(chat_id, "/calc 6*7", "reject")))
            == "handoff:queued"
        )
        queued = await stack.respond_response(token, turn(chat_id, "/calc 1+1", "enqueue"))
        assert ending(queued) == "handoff:queued"
        await wait_for_row(
            database_url, "select 1 from job_runs where kind = 'turn' and status = 'completed'"
        )
        await stack.executor.wait_idle()
    replies = await fetch(
        database_url, "select content from message where role = 'assistant' order by created_at"
    )
    assert "calc returned 42." in replies[0]["content"]
    assert "calc returned 2." in replies[1]["content"]
    assert said(await durable_messages(database_url, chat_id)) == ["/calc 6*7", "/calc 1+1"]


async def test_a_turn_waiting_behind_a_dead_quick_path_runs_after_the_relay_sweeps(
    database_url: str,
) -> None:
    # GIVEN a chat whose slot a quick path holds, one whose process stopped mid-stream a while
    # ago (its row is all that is left of it), and a message enqueued behind it
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, turn_lease_s=60, outbox_grace_s=0) as stack:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "insert into job_runs (chat_id, status, kind, event_name, idempotency_key, run_id,"
                " payload, updated_at) values (%s, 'processing', 'quick', 'chat/tool_handoff',"
                " %s, 'gone', '{}', now() - interval '30 seconds')",
                (chat_id, str(uuid.uuid4())),
            )
        queued = await stack.respond_response(
            token_for(user_id), turn(chat_id, "are you there?", "enqueue")
        )
        assert ending(queued) == "handoff:queued"

        # WHEN the lease has run out and the outbox relay makes its round
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "update job_runs set updated_at = now() - interval '2 minutes' where kind = 'quick'"
            )
        stack.executor.fire(f"{stack.settings.inngest_app_id}-outbox-relay")
        await wait_for_row(
            database_url, "select 1 from job_runs where kind = 'turn' and status = 'completed'"
        )
        await stack.executor.wait_idle()

    # THEN the dead turn's job ended, and the waiting message got its answer
    jobs = await fetch(database_url, "select kind, status from job_runs order by created_at")
    assert [(j["kind"], j["status"]) for j in jobs] == [("quick", "error"), ("turn", "completed")]
    [reply] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert (reply["status"], reply["content"]) == ("completed", 'You said: "are you there?"')
