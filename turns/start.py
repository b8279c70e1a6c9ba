"""A turn's hold on its chat's job slot, taken with the user's message, by multitask strategy.

One job per chat and assistant may be active, and a turn holds that slot from the moment its
message is stored: `quick` while the respond handler streams, then `handoff` once tools continue
in the background (infra/store/jobs.py). Two messages sent together are therefore ordered by the
database. The second one, by its strategy:

- `reject`: 409, and its message is not stored;
- `interrupt`: the active job is canceled (its reply keeps what the user saw) and the new turn
  takes the slot; a quick path that loses its slot this way stores nothing in the thread;
- `enqueue`: the turn waits behind the active job (`waiting`), with a `queued` reply; when that
  job ends, the database hands the slot to the oldest waiting turn and the background runs it
  whole;
- `steer`: the message joins the active background job (infra/store/steers.py), whose next model
  round sees it, and gets no reply of its own; while the active job is a quick path still
  streaming, it is enqueued instead.

A message to several assistants stores the user's message once and takes each further
addressee's own slot for a turn the background runs whole, by the same strategy (`steer` there
enqueues: one message joins one job).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from infra import telemetry
from infra.db import Conn, Pool
from infra.events import HANDOFF_EVENT
from infra.store import admission, messages, slots, steers
from infra.store.access import Claims, act_as_service
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.jobs import CanceledJob, JobAlreadyActive
from infra.store.limits import TurnLimits
from infra.store.messages import ReplyStatus
from infra.store.slots import SlotRequest
from infra.store.steers import SteeredJob
from turns import endings
from turns.turn import Turn, reply_metadata

logger = logging.getLogger(__name__)

Strategy = Literal["reject", "interrupt", "enqueue", "steer"]


@dataclass(frozen=True)
class Slot:
    queued: bool  # True: the turn waits behind the active job and runs in the background
    interrupted: CanceledJob | None = None  # the job this turn canceled to take the slot
    steered: SteeredJob | None = None  # the running job the message joined (`steer`)
    # The jobs of further addressees' slots that this message's `interrupt` canceled, by
    # assistant.
    others_interrupted: dict[str, CanceledJob] = field(default_factory=dict)


async def start_turn(
    pool: Pool,
    claims: Claims,
    turn: Turn,
    *,
    strategy: Strategy,
    turn_limits: TurnLimits,
    others: Sequence[Turn] = (),
) -> Slot:
    """Store the user's message and take the chat's slot, or wait for it, as `strategy` says.

    A turn that takes the slot also gets its reply, `streaming`, which the quick path's draft
    fills and which the quick path, its lease's expiry or a cancel ends. The common case, a
    free slot, is one statement (`handoff.start_turn`, infra/store/admission.py): the user's
    limits, the slot, the message and the reply. Past a limit, nothing is stored.

    `others`: the turns of the further assistants the message addresses, each taking its own
    slot for the background to run whole (`queued`; by `strategy` when it is taken, `steer`
    waiting as `enqueue` does), each with its reply, `queued`. Every reply counts against the
    limits; one refused, nothing is stored.
    """
    with telemetry.tracer.start_as_current_span(
        "store message", attributes={"handoff.strategy": strategy}
    ):
        return await _start(pool, claims, turn, strategy, turn_limits, others)


async def _start(
    pool: Pool,
    claims: Claims,
    turn: Turn,
    strategy: Strategy,
    turn_limits: TurnLimits,
    others: Sequence[Turn],
) -> Slot:
    admitted = admission_of(turn, strategy, turn_limits, others)
    if not others:
        # The common case, a free slot, is one statement, its own transaction. A slot found
        # taken stores nothing: the turn contends for it in a transaction, from the start.
        try:
            async with pool.connection() as conn:
                await admission.start(conn, admitted, slot_taken_aborts=True)
            return Slot(queued=False)
        except admission.SlotTaken:
            pass
    async with pool.connection() as conn, conn.transaction():
        # Unless the chat is the sender's or they are a member of it, all of this rolls back.
        slot = Slot(queued=False)
        if not await admission.start(conn, admitted):
            slot = await _contend(conn, turn, strategy, turn_limits.lease_s)
            if slot.steered is None:
                await _insert_reply(conn, turn, "queued" if slot.queued else "streaming")
                if slot.queued:
                    await slots.wait_for_slot(conn, _request(turn), turn.waiting().to_data())
        interrupted = {}
        for other in others:
            if canceled := await _start_other(conn, other, strategy, turn_limits.lease_s):
                interrupted[other.assistant_id] = canceled
        return replace(slot, others_interrupted=interrupted)


def admission_of(
    turn: Turn, strategy: Strategy, turn_limits: TurnLimits, others: Sequence[Turn]
) -> admission.Admission:
    """What `handoff.start_turn` admits for `turn`: its message, its slot, its reply; `others`,
    the turns of the further assistants it addresses."""
    assert turn.user_message_id is not None
    assert turn.content is not None
    addressees = [turn.assistant_id, *(o.assistant_id for o in others)]
    return admission.Admission(
        chat_id=turn.chat_id,
        user_id=turn.user_id,
        assistant_id=turn.assistant_id,
        message_id=turn.user_message_id,
        content=turn.content,
        # A message to several assistants records them all, in mention order.
        metadata={"addressedTo": addressees} if len(addressees) > 1 else {},
        limits=turn_limits,
        addressees=len(addressees),
        # The jobs this message cancels do not count; nor does one it joins (`steer`), as the
        # message adds no turn there.
        replaced=_replaced(strategy, addressees),
        stored=turn.edit is not None and turn.edit.regenerate,
        job_key=turn.job_key,
        run_id=turn.run_id,
        event=HANDOFF_EVENT,
        reply_id=turn.reply_id,
        reply_metadata=reply_metadata(turn),
    )


async def post_to_chat(
    pool: Pool,
    *,
    chat_id: ChatId,
    user_id: UserId,
    message_id: MessageId,
    content: str,
    turn_limits: TurnLimits,
) -> None:
    """Store a message posted to a shared chat that names no assistant: no turn, no reply. It
    counts against the sender's messages per minute as a turn does; ChatNotFound unless the
    chat is the sender's or they are a member of it."""
    posted = admission.Admission(
        chat_id=chat_id,
        user_id=user_id,
        assistant_id=admission.TO_CHAT,
        message_id=message_id,
        content=content,
        metadata={"addressedTo": []},
        limits=turn_limits,
        addressees=0,
    )
    async with pool.connection() as conn:
        await admission.start(conn, posted)


def _request(turn: Turn) -> SlotRequest:
    return SlotRequest(
        turn.chat_id, turn.assistant_id, turn.job_key, turn.run_id, turn.reply_id, turn.user_id
    )


def _replaced(strategy: Strategy, addressees: list[str]) -> list[str]:
    """The assistants whose active job the message cancels (`interrupt`) or joins (`steer`,
    the first addressee's alone)."""
    if strategy == "interrupt":
        return addressees
    return addressees[:1] if strategy == "steer" else []


async def _start_other(
    conn: Conn, turn: Turn, strategy: Strategy, lease_s: float
) -> CanceledJob | None:
    """A further addressee's turn: its slot, `queued` for the background to run it whole (or
    its job waiting, as `strategy` says), and its reply; the job `interrupt` canceled."""
    await act_as_service(conn)
    request = _request(turn)
    payload = turn.waiting().to_data()
    slot = Slot(queued=False)
    if not await slots.queue_turn(conn, request, payload):
        own = "enqueue" if strategy == "steer" else strategy  # one message joins one job
        slot = await _contend(
            conn, turn, own, lease_s, take=lambda: slots.queue_turn(conn, request, payload)
        )
    if slot.queued:
        await slots.wait_for_slot(conn, request, payload)
    await _insert_reply(conn, turn, "queued")
    return slot.interrupted


async def start_regeneration(conn: Conn, turn: Turn, lease_s: float) -> None:
    """A regenerated dependent of an edit (turns/cascade.py): a turn of a message already
    stored, taken like a further addressee's, `queued` for the background to run whole, or
    waiting behind its assistant's active job; its reply `queued`. Its user's limits are not
    asked: the editor's edit started it, and counted."""
    await _start_other(conn, turn, "enqueue", lease_s)


async def _contend(
    conn: Conn,
    turn: Turn,
    strategy: Strategy,
    lease_s: float,
    take: Callable[[], Awaitable[bool]] | None = None,
) -> Slot:
    """The slot is taken: free it if its quick path died, else act as `strategy` says. `take`
    takes the slot (default: for the quick path)."""
    # The Data API roles cannot write jobs: the rest is the service's.
    await act_as_service(conn)
    request = _request(turn)
    take = take or (lambda: slots.take_slot(conn, request))
    expired = await endings.expire_dead_quick(
        conn, lease_s=lease_s, chat_id=turn.chat_id, assistant_id=turn.assistant_id
    )
    if expired and await take():
        return Slot(queued=False)
    if strategy == "steer":
        assert turn.user_message_id is not None
        steered = await steers.steer_into(
            conn,
            chat_id=turn.chat_id,
            assistant_id=turn.assistant_id,
            message_id=turn.user_message_id,
        )
        if steered is not None:
            return Slot(queued=False, steered=steered)
        # The job ended meanwhile: the slot may be free now.
        if await take():
            return Slot(queued=False)
    if strategy in ("enqueue", "steer"):
        return Slot(queued=True)
    if strategy == "interrupt":
        # Another interrupting message may take the slot between the two statements.
        for _ in range(3):
            canceled = await endings.cancel_in(conn, turn.chat_id, turn.assistant_id)
            if await take():
                return Slot(queued=False, interrupted=canceled)
    raise JobAlreadyActive(turn.chat_id)


async def _insert_reply(conn: Conn, turn: Turn, status: ReplyStatus) -> None:
    assert turn.user_message_id is not None
    await messages.insert_reply(
        conn,
        reply_id=turn.reply_id,
        chat_id=turn.chat_id,
        assistant_id=turn.assistant_id,
        content="",
        status=status,
        parent_id=turn.user_message_id,
        metadata=reply_metadata(turn),
        handoff_event_id=turn.job_key if status == "queued" else None,
    )


async def expire_dead_quick_turns(pool: Pool, *, lease_s: float) -> int:
    """End the quick jobs whose process stopped mid-stream, each reply with what it showed and
    a plain note that it was interrupted; a waiting turn takes each slot."""
    async with pool.connection() as conn, conn.transaction():
        return await endings.expire_dead_quick(conn, lease_s=lease_s)
