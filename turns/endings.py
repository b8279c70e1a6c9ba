"""How a reply ends, on either path: completed, failed, canceled, expired or interrupted.

Every ending has one shape, in one transaction: the job's transition first (infra/store/jobs.py),
which locks the job's row before the reply's, as a cancel does, so that two endings never wait
on each other in opposite orders; then the reply's content and status, keeping what the user
was shown (`agent.snapshot.failed_text`, turns/shown.py); then what the turn used
(`public.reply_usage`, recorded here and nowhere else); then its draft, gone. A transition that
changes nothing (the job ended already, or is no longer this run's) leaves the reply as it is.
Once the transaction commits, the turn that waited behind the job holds the slot, and its event
goes out (`send_next`; the outbox relay sends it should that fail).

Each store module writes its own table; this module composes them. Callers already in a
transaction (the quick path storing its turn, a message that interrupts) pass its `Conn`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agent.snapshot import STOPPED_TEXT, AgentSnapshot
from agent.usage import TurnUsage
from infra.db import Conn, Pool
from infra.events import (
    REPLY_ENDED_EVENT,
    EventSender,
    ReplyEndedData,
    TurnPayload,
    send_cancel,
    send_control,
    send_handoff,
)
from infra.store import erased_turns, jobs, messages, outbox, pauses, steers, usage
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.chats import require_chat
from infra.store.draft_rows import delete_draft
from infra.store.ids import ChatId, MessageId
from infra.store.jobs import CanceledJob
from infra.store.messages import MessageMetadata
from infra.store.pauses import Resumed
from infra.store.usage import Spent
from turns.turn import Turn, spent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Next:
    """The chat and assistant whose slot an ending frees, and where the next turn's event goes."""

    events: EventSender
    chat_id: ChatId
    assistant_id: str
    # A reply whose end is announced (chat/reply.ended) once its job ends: a cascade waits
    # for it (turns/cascade.py).
    announce: MessageId | None = None


@dataclass(frozen=True)
class Outcome:
    """How a background job's turn ended: the reply's final text and where its thread stands."""

    content: str
    checkpoint_id: str | None
    usage: TurnUsage
    tool_calls: int
    spent: Spent  # what the reply's turn used, for public.reply_usage


async def record_usage(conn: Conn, turn: Turn, used: TurnUsage, snapshot: AgentSnapshot) -> None:
    """What the turn used so far, with the reply's figures (the caller's transaction)."""
    await _record(conn, turn.reply_id, spent(turn, used, snapshot))


async def settle_quick(
    conn: Conn,
    turn: Turn,
    *,
    snapshot: AgentSnapshot,
    metadata: MessageMetadata,
    used: TurnUsage,
    payload: TurnPayload | None,
) -> bool:
    """The quick path's end in `conn`'s transaction, which locked its job first: with `payload`,
    after `jobs.hold`, the reply `queued` and the job handed off; without one, after
    `jobs.complete_quick`, the reply `completed` and its draft gone. False when the turn lost
    its slot: the caller rolls the transaction back."""
    await messages.settle(
        conn,
        turn.reply_id,
        content=snapshot.text,
        status="queued" if payload is not None else "completed",
        metadata=metadata,
        handoff_event_id=turn.job_key if payload is not None else None,
    )
    await record_usage(conn, turn, used, snapshot)
    # The hand-off, under the lock `hold` took: a cancel that came first has committed by then
    # (`hold` waited for its row lock and found the slot gone), one that comes later waits for
    # this transaction.
    if payload is not None:
        return await jobs.hand_off(
            conn,
            job_key=turn.job_key,
            run_id=turn.run_id,
            reply_id=turn.reply_id,
            payload=payload,
        )
    await delete_draft(conn, turn.reply_id)
    return True


async def stop_erased(
    pool: Pool,
    turn: Turn,
    job_key: str,
    *,
    used: TurnUsage | None = None,
    snapshot: AgentSnapshot | None = None,
) -> bool:
    """A run that lost its job: True when the job was deleted with its chat or reply while it
    ran (infra/store/erased_turns.py). Then what the model `used` (if it ran since its usage
    was last recorded) is recorded against the deleted reply, the user's limit no longer counts
    the turn, and nothing else is written."""
    async with pool.connection() as conn, conn.transaction():
        if not await erased_turns.is_erased(conn, job_key):
            return False
        if used is not None and snapshot is not None:
            await record_usage(conn, turn, used, snapshot)
        await erased_turns.end(conn, job_key)
    logger.info("the turn's chat or reply was deleted: stopped", extra=turn.log)
    return True


async def keep_shown(
    pool: Pool, turn: Turn, shown: str, *, used: TurnUsage, snapshot: AgentSnapshot
) -> None:
    """A quick path that lost its slot (the cancel ended job and reply): the reply keeps all
    that its stream showed, and what the model used was spent all the same."""
    async with pool.connection() as conn, conn.transaction():
        await messages.keep_shown(conn, turn.reply_id, shown, usage=used)
        await record_usage(conn, turn, used, snapshot)


async def complete(
    pool: Pool,
    then: Next,
    *,
    job_key: str,
    reply_id: MessageId,
    outcome: Outcome,
    in_thread: list[str],
) -> bool:
    """The background job's end: its reply `completed` with `outcome`, draft gone and job
    `completed`, all or nothing; nothing at all when the job is no longer running (canceled,
    or finished already by a retry). False, and nothing changes, when a message steered into
    the job is not among `in_thread`, the ids of the thread's messages."""
    async with pool.connection() as conn, conn.transaction():
        # Locks the job first, so a message steered in later finds it completed.
        if await steers.pending(conn, job_key, in_thread):
            return False
        if await jobs.complete(conn, job_key, tool_calls=outcome.tool_calls):
            await messages.complete(
                conn,
                reply_id,
                content=outcome.content,
                checkpoint_id=outcome.checkpoint_id,
                usage=outcome.usage,
            )
            await _record(conn, reply_id, outcome.spent)
            await delete_draft(conn, reply_id)
    await send_next(pool, then)
    return True


async def fail(
    pool: Pool,
    *,
    job_key: str,
    user_text: str,
    error: str,
    shown: str | None = None,
    then: Next | None = None,
) -> str | None:
    """The job ends in `error` (a code, no internals); its reply keeps what it showed
    (`shown`, else its latest draft) and says `user_text` after it. The reply's text as it
    ended; None if the job had ended already (or the reply had). With `then`, the next turn
    goes once this commits."""
    content = None
    async with pool.connection() as conn, conn.transaction():
        reply_id = await jobs.fail(conn, job_key, error)
        if reply_id is not None:
            content = await messages.fail(conn, reply_id, user_text, shown)
            await delete_draft(conn, reply_id)
    if then is not None:
        await send_next(pool, then)
    return content


async def cancel_in(conn: Conn, chat_id: ChatId, assistant_id: str) -> CanceledJob | None:
    """Cancel the active job of the chat and assistant within `conn`'s transaction: the job and
    its reply end `canceled` together, so the user's view is settled whatever the run does."""
    canceled = await jobs.cancel(conn, chat_id, assistant_id)
    if canceled is not None and canceled.reply_id is not None:
        await _cancel_reply(conn, canceled.reply_id)
    return canceled


async def cancel(pool: Pool, then: Next, claims: Claims) -> CanceledJob | None:
    """The user's cancel of the chat's running job; None when there is none (idle). Once it
    commits, the job's run is told to stop and the next turn goes.

    The chat is looked up under the user's RLS, so another user's chat is ChatNotFound; the
    job and message writes are the service's, as the Data API roles cannot write jobs.
    """
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, then.chat_id)
        await act_as_service(conn)
        canceled = await cancel_in(conn, then.chat_id, then.assistant_id)
    if canceled is None:
        return None
    # A turn still on its quick path has no run to stop: it finds its slot gone and stops.
    if canceled.reply_id is not None and not canceled.quick:
        await send_cancel(
            then.events,
            chat_id=then.chat_id,
            assistant_id=then.assistant_id,
            reply_id=canceled.reply_id,
        )
    await send_next(pool, then)
    return canceled


async def settle_pause(pool: Pool, then: Next, job_key: str) -> Resumed:
    """After a pause's wait: resumed, with its instruction; or, still paused, the job ends
    `canceled`, its reply keeping what it showed, and the next turn goes."""
    async with pool.connection() as conn, conn.transaction():
        resumed = await pauses.settle(conn, job_key)
        if resumed.canceled is not None:
            await _cancel_reply(conn, resumed.canceled)
    if not resumed.resumed:
        await send_next(pool, then)
    return resumed


async def expire_dead_quick(
    conn: Conn, *, lease_s: float, chat_id: ChatId | None = None, assistant_id: str = ""
) -> int:
    """End the quick jobs (of one chat and assistant, or all) silent for `lease_s`, within
    `conn`'s transaction: each reply still streaming keeps what its draft showed, then a plain
    note that it stopped, in `error`. How many jobs ended."""
    ended = await jobs.expire_dead_quick(
        conn, lease_s=lease_s, chat_id=chat_id, assistant_id=assistant_id
    )
    replies = [MessageId(r) for r in ended if r is not None]
    for reply_id in await messages.interrupt(conn, replies, STOPPED_TEXT):
        await delete_draft(conn, reply_id)
    return len(ended)


async def send_next(pool: Pool, then: Next) -> None:
    """Send the event of a turn that waited and took the chat's slot when the job ahead of it
    ended. The outbox relay sends it should this fail. Then announce the reply that ended,
    when one is to be (a cascade's wait reads the database too, should this be lost)."""
    if then.announce is not None:
        data = ReplyEndedData(chatId=str(then.chat_id), messageId=str(then.announce))
        await send_control(then.events, REPLY_ENDED_EVENT, data)
    try:
        for job in await outbox.unsent_of(pool, then.chat_id, then.assistant_id):
            await send_handoff(then.events, job.idempotency_key, job.payload)
            await outbox.mark_sent(pool, [job.idempotency_key])
    except Exception:
        logger.exception(
            "queued turn not sent; left in the outbox", extra={"chat_id": str(then.chat_id)}
        )


async def _cancel_reply(conn: Conn, reply_id: MessageId) -> None:
    await messages.cancel(conn, reply_id)
    await delete_draft(conn, reply_id)


async def _record(conn: Conn, reply_id: MessageId, used: Spent) -> None:
    await usage.record(conn, reply_id, used)
