"""A turn's hold on its chat's job slot, taken with the user's message, by multitask strategy.

One job per chat and assistant may be active (a partial unique index), and a turn holds that
slot from the moment its message is stored: `quick` while the respond handler streams, then
`handoff` once tools continue in the background. Two messages sent together are therefore
ordered by the database. The second one, by its strategy:

- `reject`: 409, and its message is not stored;
- `interrupt`: the active job is canceled (its message keeps what the user saw) and the new turn
  takes the slot; a quick path that loses its slot this way stores nothing of its turn;
- `enqueue`: the turn waits behind the active job (`waiting`), with a `queued` reply; when that
  job ends, the database hands the slot to the oldest waiting turn (migration 0007) and the
  background runs it whole.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

from psycopg.types.json import Jsonb

from infra import chat_store
from infra.chat_store import ChatId, ChatNotFound, DuplicateMessage, JobAlreadyActive, MessageId
from infra.db import Conn, Pool
from infra.events import HANDOFF_EVENT, EventSender, HandoffPayload, send_handoff
from infra.job_control import CanceledJob, cancel_job_in

logger = logging.getLogger(__name__)

Strategy = Literal["reject", "interrupt", "enqueue"]

# Under the user's RLS: the message goes in only if the chat is theirs.
STORE_MESSAGE_SQL = """
with visible as (
  select id from public.chat where id = %(chat_id)s
), inserted as (
  insert into public.message (id, chat_id, assistant_id, role, content, status)
  select %(message_id)s, id, %(assistant_id)s, 'user', %(content)s, 'completed'
  from visible
  on conflict (id) do nothing
  returning id
)
select exists (select 1 from visible) as visible, exists (select 1 from inserted) as inserted
"""
# A quick path that died (its process killed mid-stream) must not hold the slot for good.
EXPIRE_QUICK_SQL = """
update public.job_runs set status = 'error', error = 'the quick path stopped', updated_at = now()
where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s and kind = 'quick'
  and status = 'processing' and updated_at < now() - make_interval(secs => %(lease_s)s)
"""
# The same, for every chat: the outbox relay's sweep, so that a turn waiting behind a dead one
# does not wait for another message to come along.
EXPIRE_ALL_QUICK_SQL = """
update public.job_runs set status = 'error', error = 'the quick path stopped', updated_at = now()
where kind = 'quick' and status = 'processing'
  and updated_at < now() - make_interval(secs => %(lease_s)s)
"""
# Waits for a concurrent taker to commit, then takes the slot or finds it taken. Runs before
# the chat is known to be the caller's: if it is not, the transaction rolls this back.
TAKE_SLOT_SQL = """
insert into public.job_runs
  (chat_id, assistant_id, status, kind, event_name, idempotency_key, run_id, payload)
select %(chat_id)s, %(assistant_id)s, 'processing', 'quick', %(event)s, %(key)s, %(run_id)s,
       '{}'::jsonb
where exists (select 1 from public.chat where id = %(chat_id)s)
on conflict (chat_id, assistant_id) where status in ('queued', 'processing') do nothing
returning id
"""
WAIT_SQL = """
insert into public.job_runs
  (chat_id, assistant_id, root_message_id, status, kind, event_name, idempotency_key, payload)
values (%(chat_id)s, %(assistant_id)s, %(reply_id)s, 'waiting', 'turn', %(event)s, %(key)s,
        %(payload)s)
"""


@dataclass(frozen=True)
class Slot:
    queued: bool  # True: the turn waits behind the active job and runs in the background
    interrupted: CanceledJob | None = None  # the job this turn canceled to take the slot


@dataclass(frozen=True)
class NewTurn:
    chat_id: ChatId
    assistant_id: str
    message_id: MessageId
    content: str
    job_key: str  # the job's idempotency key, and its handoff event's id
    run_id: str
    reply_id: MessageId
    queued_payload: dict[str, Any]  # the job's payload, should it have to wait
    reply_metadata: dict[str, Any]


async def start_turn(
    pool: Pool, claims: dict[str, Any], turn: NewTurn, *, strategy: Strategy, lease_s: float
) -> Slot:
    """Store the user's message and take the chat's slot, or wait for it, as `strategy` says.

    The common case costs one statement more than storing the message: the slot is free.
    """
    async with pool.connection() as conn, conn.transaction():
        took = await _take_slot(conn, turn)
        # The user's part, under RLS: unless the chat is theirs, all of this rolls back.
        await conn.execute(chat_store.SET_REQUEST_SQL, (json.dumps(claims),))
        params = {
            "chat_id": turn.chat_id,
            "assistant_id": turn.assistant_id,
            "message_id": turn.message_id,
            "content": turn.content,
        }
        row = await (await conn.execute(STORE_MESSAGE_SQL, params)).fetchone()
        if row is None or not row["visible"]:
            raise ChatNotFound(turn.chat_id)
        if not row["inserted"]:
            raise DuplicateMessage(turn.message_id)
        if took:
            return Slot(queued=False)
        # The Data API roles cannot write jobs: the rest is the service's.
        await conn.execute(chat_store.SERVICE_ROLE_SQL)
        scope = {"chat_id": turn.chat_id, "assistant_id": turn.assistant_id, "lease_s": lease_s}
        expired = await conn.execute(EXPIRE_QUICK_SQL, scope)
        if expired.rowcount and await _take_slot(conn, turn):
            return Slot(queued=False)
        if strategy == "enqueue":
            await _wait(conn, turn)
            return Slot(queued=True)
        if strategy == "interrupt":
            # Another interrupting message may take the slot between the two statements.
            for _ in range(3):
                canceled = await cancel_job_in(conn, turn.chat_id, turn.assistant_id)
                if await _take_slot(conn, turn):
                    return Slot(queued=False, interrupted=canceled)
        raise JobAlreadyActive(turn.chat_id)


async def _take_slot(conn: Conn, turn: NewTurn) -> bool:
    params = {
        "chat_id": turn.chat_id,
        "assistant_id": turn.assistant_id,
        "event": HANDOFF_EVENT,
        "key": turn.job_key,
        "run_id": turn.run_id,
    }
    return await (await conn.execute(TAKE_SLOT_SQL, params)).fetchone() is not None


async def _wait(conn: Conn, turn: NewTurn) -> None:
    await chat_store.insert_assistant_message(
        conn,
        message_id=turn.reply_id,
        chat_id=turn.chat_id,
        assistant_id=turn.assistant_id,
        content="",
        status="queued",
        parent_id=turn.message_id,
        metadata=turn.reply_metadata,
        handoff_event_id=turn.job_key,
    )
    params = {
        "chat_id": turn.chat_id,
        "assistant_id": turn.assistant_id,
        "reply_id": turn.reply_id,
        "event": HANDOFF_EVENT,
        "key": turn.job_key,
        "payload": Jsonb(turn.queued_payload),
    }
    await conn.execute(WAIT_SQL, params)


async def send_queued_turns(
    pool: Pool, sender: EventSender, chat_id: ChatId, assistant_id: str
) -> None:
    """Send the event of a turn that waited and took the chat's slot when the job ahead of it
    ended. Called by whoever ended that job; the outbox relay sends it should this fail."""
    try:
        for job in await chat_store.unsent_jobs_of(pool, chat_id, assistant_id):
            payload = HandoffPayload.model_validate(job.payload)
            await send_handoff(sender, job.idempotency_key, payload)
            await chat_store.mark_events_sent(pool, [job.idempotency_key])
    except Exception:
        logger.exception(
            "queued turn not sent; left in the outbox", extra={"chat_id": str(chat_id)}
        )


async def expire_dead_quick_turns(pool: Pool, *, lease_s: float) -> int:
    """End the quick jobs whose process stopped mid-stream; a waiting turn takes each slot."""
    async with pool.connection() as conn:
        return (await conn.execute(EXPIRE_ALL_QUICK_SQL, {"lease_s": lease_s})).rowcount
