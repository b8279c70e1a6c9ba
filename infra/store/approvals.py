"""Tool calls waiting for the user's decision, kept on the assistant message.

While a call waits, the message is `awaiting_approval` with the call in
`metadata.pendingApproval`, which is what a Realtime subscriber renders as a question. The
user's decision is recorded in `metadata.approvals[<tool call id>]` before the
`chat/tool_approval` event wakes the function (infra/store/prompts.py).
"""

from __future__ import annotations

from typing import Any, TypedDict

from infra.db import Conn, Pool
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.ids import ChatId, MessageId
from infra.store.prompts import PromptKind, require_starter


class PendingApproval(TypedDict):
    """`metadata.pendingApproval`: the call waiting for the user, as a frontend renders it."""

    toolCallId: str
    name: str
    args: dict[str, Any]
    display: str  # the arguments as shown, nothing hidden (agent/display.py)
    expiresAt: str  # ISO 8601


class Decision(TypedDict):
    approved: bool
    note: str | None
    timed_out: bool


APPROVALS = PromptKind[PendingApproval, Decision](
    status="awaiting_approval",
    pending_key="pendingApproval",
    id_key="toolCallId",
    record_key="approvals",
)


class ApprovalNotFound(LookupError):
    """No call of the user's chat waits for a decision under this id."""


class ApprovalAlreadyDecided(RuntimeError):
    """The call already has the user's decision."""


async def ask(conn: Conn, message_id: MessageId, pending: PendingApproval) -> bool:
    """Put the call to the user; False when it was decided already (a replayed job)."""
    return await APPROVALS.ask(conn, message_id, pending)


async def waiting(conn: Conn, message_id: MessageId, call_id: str) -> bool:
    """Whether the call still waits for the user's decision, within its time."""
    return await APPROVALS.waiting(conn, message_id, call_id)


async def decision(conn: Conn, message_id: MessageId, call_id: str) -> Decision | None:
    return await APPROVALS.reply(conn, message_id, call_id)


async def settle(conn: Conn, message_id: MessageId, call_id: str, outcome: Decision) -> Decision:
    """Record `outcome` unless the user's decision is there, close the question; the decision."""
    return await APPROVALS.settle(conn, message_id, call_id, outcome)


async def record_decision(
    pool: Pool,
    claims: Claims,
    *,
    chat_id: ChatId,
    call_id: str,
    approved: bool,
    note: str | None,
) -> MessageId:
    """The decision of the person who started the turn on a waiting call; returns the message
    that waits. ApprovalNotFound unless a message of a chat the caller is in waits on the call;
    NotTurnStarter when someone else started the turn."""
    async with user_transaction(pool, claims) as conn:
        pending = await APPROVALS.pending_in(conn, chat_id, call_id)
        if pending is None:
            raise ApprovalNotFound(call_id)
        message_id, decided = pending
        await act_as_service(conn)
        await require_starter(conn, message_id, claims["sub"])
        if decided:
            raise ApprovalAlreadyDecided(call_id)
        outcome = Decision(approved=approved, note=note, timed_out=False)
        if not await APPROVALS.record(conn, message_id, call_id, outcome):
            raise ApprovalAlreadyDecided(call_id)
    return message_id
