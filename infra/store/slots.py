"""Taking a chat's job slot (infra/store/jobs.py: one active job per chat and assistant).

A turn takes its slot with its user's message: as a `quick` job, for the respond handler to
stream (`take_slot`); as a `turn` job the background runs whole, `queued` in a free slot (a
further assistant a message addresses: `queue_turn`), or `waiting` behind the active job, which
holds no slot until promotion queues it (`wait_for_slot`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from psycopg.types.json import Jsonb

from infra.db import Conn
from infra.events import HANDOFF_EVENT, TurnPayload
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.statuses import SLOT_STATUSES, with_statuses

# Waits for a concurrent taker to commit, then takes the slot or finds it taken (migration 0025,
# which handoff.start_turn calls too). Runs before the chat is known to be the caller's: if it
# is not, the transaction rolls this back.
TAKE_SLOT_SQL = """
select handoff.take_slot(
  %(chat_id)s, %(assistant_id)s, %(reply_id)s, %(event)s, %(job_key)s, %(run_id)s, %(sender_id)s
) as took
"""
# A turn the background runs whole: `waiting` behind the active job (no slot: promotion queues
# it), or `queued` in a free slot, as a further assistant a message addresses; like
# TAKE_SLOT_SQL, finds the slot taken or takes it.
BACKGROUND_TURN_SQL = with_statuses(
    """
insert into public.job_runs
  (chat_id, assistant_id, root_message_id, status, kind, event_name, idempotency_key, payload,
   sender_id)
values (%(chat_id)s, %(assistant_id)s, %(reply_id)s, %(status)s, 'turn', %(event)s, %(job_key)s,
        %(payload)s, %(sender_id)s)
on conflict (chat_id, assistant_id) where status in ({slot}) do nothing
returning id
""",
    slot=SLOT_STATUSES,
)


@dataclass(frozen=True)
class SlotRequest:
    """A turn asking for its chat's slot; the job's key is also its handoff event's id."""

    chat_id: ChatId
    assistant_id: str
    job_key: str
    run_id: str
    reply_id: MessageId  # inserted, `streaming`, in the same transaction once the slot is taken
    sender_id: UserId  # whose turn it is: the limits count it against them


async def take_slot(conn: Conn, turn: SlotRequest) -> bool:
    params = {**asdict(turn), "event": HANDOFF_EVENT}
    row = await (await conn.execute(TAKE_SLOT_SQL, params)).fetchone()
    return row is not None and bool(row["took"])


async def queue_turn(conn: Conn, turn: SlotRequest, payload: TurnPayload) -> bool:
    """Take the slot for a turn the background runs whole, `queued`; False if it is taken."""
    return await _background_turn(conn, turn, payload, "queued")


async def wait_for_slot(conn: Conn, turn: SlotRequest, payload: TurnPayload) -> None:
    """The turn waits behind the active job; promotion queues it when that job ends."""
    await _background_turn(conn, turn, payload, "waiting")


async def _background_turn(
    conn: Conn, turn: SlotRequest, payload: TurnPayload, status: str
) -> bool:
    params = {**asdict(turn), "event": HANDOFF_EVENT, "payload": Jsonb(payload), "status": status}
    return await (await conn.execute(BACKGROUND_TURN_SQL, params)).fetchone() is not None
