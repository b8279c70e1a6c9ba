"""`start_turn` against the database, without the app: a second message of a chat whose slot is
taken, by strategy, and a slot held by a quick path that died. tests/handlers/test_double_texting.py
races the same through the API."""

from __future__ import annotations

import uuid

import pytest

from agent.snapshot import STOPPED_TEXT
from infra.db import Pool
from infra.store.access import Claims
from infra.store.chats import ChatNotFound
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.jobs import JobAlreadyActive
from infra.store.limits import TurnLimits
from tests.support import create_user_with_chat, execute, fetch
from turns.start import Strategy, start_turn
from turns.turn import Turn

ROOMY = TurnLimits(max_active=10, per_minute=100, lease_s=30)
JOBS_SQL = "select root_message_id, kind, status from job_runs order by created_at"
REPLIES_SQL = """
select id, content, status from message where role = 'assistant' order by created_at
"""
USER_MESSAGES_SQL = "select content from message where role = 'user' order by created_at"


def a_turn(user_id: uuid.UUID, chat_id: uuid.UUID, content: str) -> Turn:
    return Turn(
        chat_id=ChatId(chat_id),
        user_id=UserId(user_id),
        assistant_id="default",
        thread_id=f"{chat_id}:default",
        reply_id=MessageId(uuid.uuid4()),
        user_message_id=MessageId(uuid.uuid4()),
        content=content,
        model_spec={"model": "scripted"},
        job_key=str(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
    )


def claims_of(user_id: uuid.UUID) -> Claims:
    return {"sub": str(user_id), "role": "authenticated", "aud": "authenticated"}


async def streaming_turn(database_url: str, pool: Pool) -> tuple[uuid.UUID, uuid.UUID, Turn]:
    """GIVEN a chat whose first turn holds the slot, its quick path streaming."""
    user_id, chat_id = await create_user_with_chat(database_url)
    first = a_turn(user_id, chat_id, "the first message")
    slot = await start_turn(pool, claims_of(user_id), first, strategy="reject", turn_limits=ROOMY)
    assert (slot.queued, slot.interrupted, slot.steered) == (False, None, None)
    return user_id, chat_id, first


async def test_a_second_message_with_reject_is_refused_and_not_stored(
    database_url: str, pool: Pool
) -> None:
    user_id, chat_id, first = await streaming_turn(database_url, pool)
    second = a_turn(user_id, chat_id, "the second message")
    with pytest.raises(JobAlreadyActive):
        await start_turn(pool, claims_of(user_id), second, strategy="reject", turn_limits=ROOMY)
    assert await fetch(database_url, USER_MESSAGES_SQL) == [{"content": "the first message"}]
    [job] = await fetch(database_url, JOBS_SQL)
    assert (job["root_message_id"], job["status"]) == (first.reply_id, "processing")


@pytest.mark.parametrize("strategy", ["enqueue", "steer"])
async def test_a_second_message_waits_its_turn_and_takes_the_slot_when_the_first_ends(
    database_url: str, pool: Pool, strategy: Strategy
) -> None:
    # (a steer into a quick path still streaming waits as an enqueued message does)
    user_id, chat_id, first = await streaming_turn(database_url, pool)
    second = a_turn(user_id, chat_id, "the second message")
    slot = await start_turn(pool, claims_of(user_id), second, strategy=strategy, turn_limits=ROOMY)
    assert (slot.queued, slot.steered) == (True, None)
    replies = await fetch(database_url, REPLIES_SQL)
    assert [(r["id"], r["status"]) for r in replies] == [
        (first.reply_id, "streaming"),
        (second.reply_id, "queued"),
    ]
    jobs = await fetch(database_url, JOBS_SQL)
    assert [j["status"] for j in jobs] == ["processing", "waiting"]
    # WHEN the first turn's job ends
    await execute(
        database_url,
        "update job_runs set status = 'completed' where root_message_id = %s",
        first.reply_id,
    )
    # THEN the waiting turn has the slot, for the background to run
    jobs = await fetch(database_url, JOBS_SQL)
    assert [(j["root_message_id"], j["status"]) for j in jobs] == [
        (first.reply_id, "completed"),
        (second.reply_id, "queued"),
    ]


async def test_a_second_message_with_interrupt_cancels_the_first_and_takes_its_slot(
    database_url: str, pool: Pool
) -> None:
    user_id, chat_id, first = await streaming_turn(database_url, pool)
    second = a_turn(user_id, chat_id, "never mind")
    slot = await start_turn(
        pool, claims_of(user_id), second, strategy="interrupt", turn_limits=ROOMY
    )
    assert slot.queued is False
    assert slot.interrupted is not None
    assert (slot.interrupted.reply_id, slot.interrupted.quick) == (first.reply_id, True)
    replies = await fetch(database_url, REPLIES_SQL)
    assert [r["status"] for r in replies] == ["canceled", "streaming"]
    jobs = await fetch(database_url, JOBS_SQL)
    assert [j["status"] for j in jobs] == ["canceled", "processing"]


async def test_a_slot_held_by_a_quick_path_that_died_is_freed_for_the_next_message(
    database_url: str, pool: Pool
) -> None:
    # GIVEN a quick path that showed some text, then went silent past its lease
    user_id, chat_id, first = await streaming_turn(database_url, pool)
    await execute(
        database_url,
        "insert into message_draft (message_id, chat_id, draft_content, seq)"
        " values (%s, %s, 'Half an ans', 1)",
        first.reply_id,
        chat_id,
    )
    await execute(database_url, "update job_runs set updated_at = now() - interval '1 minute'")
    # WHEN the next message comes, even one that would not wait
    second = a_turn(user_id, chat_id, "are you there?")
    slot = await start_turn(pool, claims_of(user_id), second, strategy="reject", turn_limits=ROOMY)
    # THEN it takes the slot, and the dead turn's reply ends with what it showed and a note
    assert (slot.queued, slot.interrupted) == (False, None)
    [dead, live] = await fetch(database_url, REPLIES_SQL)
    assert (dead["status"], dead["content"]) == ("error", f"Half an ans\n\n{STOPPED_TEXT}")
    assert live["status"] == "streaming"
    jobs = await fetch(database_url, "select status, error from job_runs order by created_at")
    assert [(j["status"], j["error"]) for j in jobs] == [
        ("error", "quick_path_stopped"),
        ("processing", None),
    ]


async def test_a_message_into_another_users_chat_stores_nothing(
    database_url: str, pool: Pool
) -> None:
    _, chat_id = await create_user_with_chat(database_url)
    stranger, _ = await create_user_with_chat(database_url)
    turn = a_turn(stranger, chat_id, "hello")
    with pytest.raises(ChatNotFound):
        await start_turn(pool, claims_of(stranger), turn, strategy="reject", turn_limits=ROOMY)
    assert await fetch(database_url, "select * from message") == []
    assert await fetch(database_url, "select * from job_runs") == []
