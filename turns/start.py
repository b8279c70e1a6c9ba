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
from infra.store import admission, erased_turns, limits, messages, slots, steers
from infra.store.access import Claims, act_as_service
from infra.store.chats import ChatNotFound
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.jobs import CanceledJob, JobAlreadyActive
from infra.store.limits import TurnLimits
from infra.store.messages import ReplyStatus
from infra.store.slots import SlotRequest
from infra.store.steers import SteeredJob
from turns import endings
from turns.engine import reply_metadata
from turns.turn import Turn

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
    fills and which the quick path, its lease's expiry or a cancel ends. The common case costs
    three statements more than storing the message: the user's limits (infra/store/limits.py),
    the slot, which is free, and the reply; a daily token budget, when set, one more. Past a
    limit, nothing is stored.

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
    assert turn.user_message_id is not None
    assert turn.content is not None
    request = _request(turn)
    addressees = [turn.assistant_id, *(o.assistant_id for o in others)]
    async with pool.connection() as conn, conn.transaction():
        await limits.admit(
            conn, turn.user_id, "turns", limit=turn_limits.per_minute, count=len(addressees)
        )
        if turn_limits.daily_tokens is not None:
            await limits.check_daily_tokens(conn, turn.user_id, budget=turn_limits.daily_tokens)
        took = await slots.take_slot(conn, request)
        erased_running = await erased_turns.running(
            conn, turn.user_id, lease_s=turn_limits.lease_s, job_lease_s=turn_limits.job_lease_s
        )
        # Unless the chat is the sender's or they are a member of it, all of this rolls back.
        stored = await admission.store_user_message(
            conn,
            chat_id=turn.chat_id,
            assistant_id=turn.assistant_id,
            message_id=turn.user_message_id,
            content=turn.content,
            user_id=turn.user_id,
            job_key=turn.job_key,
            limits=turn_limits,
            # The jobs this message cancels do not count; nor does one it joins (`steer`), as
            # the message adds no turn there.
            replaced=_replaced(strategy, addressees),
            addressees=addressees,
            stored=turn.edit is not None and turn.edit.regenerate,
            erased_running=erased_running,
        )
        if not stored:
            raise ChatNotFound(turn.chat_id)
        slot = Slot(queued=False)
        if not took:
            slot = await _contend(conn, turn, strategy, turn_limits.lease_s)
        if slot.steered is None:
            await _insert_reply(conn, turn, "queued" if slot.queued else "streaming")
            if slot.queued:
                await slots.wait_for_slot(conn, request, turn.waiting().to_data())
        interrupted = {}
        for other in others:
            if canceled := await _start_other(conn, other, strategy, turn_limits.lease_s):
                interrupted[other.assistant_id] = canceled
        return replace(slot, others_interrupted=interrupted)


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
    async with pool.connection() as conn, conn.transaction():
        await limits.admit(conn, user_id, "turns", limit=turn_limits.per_minute, count=1)
        stored = await admission.store_user_message(
            conn,
            chat_id=chat_id,
            assistant_id=admission.TO_CHAT,
            message_id=message_id,
            content=content,
            user_id=user_id,
            job_key="",
            limits=turn_limits,
        )
        if not stored:
            raise ChatNotFound(chat_id)


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
