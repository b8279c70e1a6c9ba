"""turns/endings.py against the database, without the app: a reply's end writes the job, the
reply, its usage and its draft all together or not at all, and only then lets the turn that
waited go."""

from __future__ import annotations

import uuid

import inngest
import pytest
from psycopg import DataError

from agent.usage import TurnUsage
from infra.db import Pool
from infra.store.usage import Spent
from tests.support import create_user_with_chat, fetch, write_draft
from tests.turns.test_start import ROOMY, a_turn, claims_of
from turns import endings
from turns.start import start_turn
from turns.turn import Turn

JOB_SQL = "select status from job_runs where idempotency_key = %s"
REPLY_SQL = "select content, status from message where id = %s"
DRAFT_SQL = "select draft_content from message_draft where message_id = %s"
USAGE_SQL = "select input_tokens, output_tokens from reply_usage where message_id = %s"


class SentEvents:
    """Stands in for the Inngest client: keeps what was sent, and sends nothing."""

    def __init__(self) -> None:
        self.sent: list[inngest.Event] = []

    async def send(self, events: inngest.Event | list[inngest.Event]) -> list[str]:
        self.sent += events if isinstance(events, list) else [events]
        return [str(uuid.uuid4())]

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.sent]


def outcome(content: str) -> endings.Outcome:
    spent = Spent(model="scripted", input_tokens=12, output_tokens=5, tool_calls=1)
    usage: TurnUsage = {"rounds": [{"input": 12, "output": 5}], "input": 12, "output": 5}
    return endings.Outcome(content, None, usage=usage, tool_calls=1, spent=spent)


async def background_turn(database_url: str, pool: Pool) -> tuple[uuid.UUID, Turn]:
    """GIVEN a turn handed to the background, its reply showing a draft."""
    user_id, chat_id = await create_user_with_chat(database_url)
    turn = a_turn(user_id, chat_id, "the first message")
    await start_turn(pool, claims_of(user_id), turn, strategy="reject", turn_limits=ROOMY)
    async with pool.connection() as conn:
        await conn.execute(
            "update job_runs set kind = 'handoff' where idempotency_key = %s", (turn.job_key,)
        )
    await write_draft(database_url, turn.reply_id, chat_id, "Looking it up", 1)
    return user_id, turn


async def test_a_completion_ends_job_reply_usage_and_draft_then_the_waiting_turn_goes(
    database_url: str, pool: Pool
) -> None:
    user_id, first = await background_turn(database_url, pool)
    second = a_turn(user_id, first.chat_id, "the second message")
    await start_turn(pool, claims_of(user_id), second, strategy="enqueue", turn_limits=ROOMY)
    events = SentEvents()
    then = endings.Next(events, first.chat_id, first.assistant_id)

    # WHEN the job completes
    in_thread: list[str] = []
    done = await endings.complete(
        pool,
        then,
        job_key=first.job_key,
        reply_id=first.reply_id,
        outcome=outcome("42"),
        in_thread=in_thread,
    )

    # THEN the reply shows its answer, its usage is counted, its draft is gone, and the turn
    # that waited holds the slot with its event sent
    assert done
    assert await fetch(database_url, JOB_SQL, first.job_key) == [{"status": "completed"}]
    assert await fetch(database_url, REPLY_SQL, first.reply_id) == [
        {"content": "42", "status": "completed"}
    ]
    assert await fetch(database_url, USAGE_SQL, first.reply_id) == [
        {"input_tokens": 12, "output_tokens": 5}
    ]
    assert await fetch(database_url, DRAFT_SQL, first.reply_id) == []
    assert await fetch(database_url, JOB_SQL, second.job_key) == [{"status": "queued"}]
    assert [(e.name, e.id) for e in events.sent] == [("chat/tool_handoff", second.job_key)]


async def test_a_completion_that_fails_halfway_leaves_nothing_written(
    database_url: str, pool: Pool
) -> None:
    _, turn = await background_turn(database_url, pool)
    events = SentEvents()
    then = endings.Next(events, turn.chat_id, turn.assistant_id)

    # WHEN the reply's write fails after the job's transition (Postgres refuses a NUL)
    with pytest.raises(DataError):
        await endings.complete(
            pool,
            then,
            job_key=turn.job_key,
            reply_id=turn.reply_id,
            outcome=outcome("4\x002"),
            in_thread=[],
        )

    # THEN the job still runs, and the user still sees the draft: a retry can complete it
    assert await fetch(database_url, JOB_SQL, turn.job_key) == [{"status": "processing"}]
    assert await fetch(database_url, REPLY_SQL, turn.reply_id) == [
        {"content": "", "status": "streaming"}
    ]
    assert await fetch(database_url, DRAFT_SQL, turn.reply_id) == [
        {"draft_content": "Looking it up"}
    ]
    assert await fetch(database_url, USAGE_SQL, turn.reply_id) == []
    assert events.sent == []


async def test_a_completion_after_a_cancel_changes_nothing(database_url: str, pool: Pool) -> None:
    user_id, turn = await background_turn(database_url, pool)
    events = SentEvents()
    then = endings.Next(events, turn.chat_id, turn.assistant_id)
    canceled = await endings.cancel(pool, then, claims_of(user_id))
    assert canceled is not None
    assert canceled.reply_id == turn.reply_id
    assert events.names == ["chat/cancel"]  # the run is told to stop

    # WHEN the run, not yet stopped, reports its answer
    in_thread: list[str] = []
    done = await endings.complete(
        pool,
        then,
        job_key=turn.job_key,
        reply_id=turn.reply_id,
        outcome=outcome("42"),
        in_thread=in_thread,
    )

    # THEN the reply keeps what the user saw when they canceled, and nothing is counted twice
    assert done
    assert await fetch(database_url, JOB_SQL, turn.job_key) == [{"status": "canceled"}]
    assert await fetch(database_url, REPLY_SQL, turn.reply_id) == [
        {"content": "Looking it up", "status": "canceled"}
    ]
    assert await fetch(database_url, USAGE_SQL, turn.reply_id) == []
    assert await fetch(database_url, DRAFT_SQL, turn.reply_id) == []
    assert events.names == ["chat/cancel"]
