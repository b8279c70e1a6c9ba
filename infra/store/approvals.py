"""Tool calls waiting for the user's decision, kept on the assistant message.

While a call waits, the message is `awaiting_approval` with the call in
`metadata.pendingApproval`, which is what a Realtime subscriber renders as a question. The
user's decision is recorded in `metadata.approvals[<tool call id>]` before the
`chat/tool_approval` event wakes the function, so the event is only a signal: a decision whose
event came too early for the wait (or was lost) is still found, and an event cannot carry a
decision the owner did not record.
"""

from __future__ import annotations

from typing import Any, TypedDict

from psycopg.types.json import Jsonb

from infra.db import Conn, Pool
from infra.store.access import user_transaction
from infra.store.ids import ChatId, MessageId


class Decision(TypedDict):
    approved: bool
    note: str | None
    timed_out: bool


class ApprovalNotFound(LookupError):
    """No call of the user's chat waits for a decision under this id."""


class ApprovalAlreadyDecided(RuntimeError):
    """The call already has the user's decision."""


ASK_SQL = """
update public.message
set status = 'awaiting_approval',
    metadata = metadata || jsonb_build_object('pendingApproval', %(pending)s::jsonb),
    updated_at = now()
where id = %(message_id)s and status in ('queued', 'streaming')
  and not (coalesce(metadata -> 'approvals', '{}'::jsonb) ? %(call_id)s)
returning id
"""
DECISION_SQL = """
select metadata -> 'approvals' -> %(call_id)s as decision from public.message
where id = %(message_id)s
"""
# Under the user's RLS: the call must be the one their chat's message is waiting on.
PENDING_SQL = """
select id, metadata -> 'approvals' ? %(call_id)s as decided from public.message
where chat_id = %(chat_id)s and status = 'awaiting_approval'
  and metadata -> 'pendingApproval' ->> 'toolCallId' = %(call_id)s
"""
RECORD_SQL = """
update public.message
set metadata = metadata || jsonb_build_object(
      'approvals',
      coalesce(metadata -> 'approvals', '{}'::jsonb)
        || jsonb_build_object(%(call_id)s, %(decision)s::jsonb)),
    updated_at = now()
where id = %(message_id)s and status = 'awaiting_approval'
  and not (coalesce(metadata -> 'approvals', '{}'::jsonb) ? %(call_id)s)
returning id
"""
SETTLE_SQL = """
update public.message
set status = 'streaming', metadata = metadata - 'pendingApproval', updated_at = now()
where id = %(message_id)s and status = 'awaiting_approval'
"""


async def ask(conn: Conn, message_id: MessageId, pending: dict[str, Any]) -> bool:
    """Put the call to the user; False when it was decided already (a replayed job)."""
    params = {"message_id": message_id, "pending": Jsonb(pending), "call_id": pending["toolCallId"]}
    return await (await conn.execute(ASK_SQL, params)).fetchone() is not None


async def decision(conn: Conn, message_id: MessageId, call_id: str) -> Decision | None:
    params = {"message_id": message_id, "call_id": call_id}
    row = await (await conn.execute(DECISION_SQL, params)).fetchone()
    found: Decision | None = row["decision"] if row else None
    return found


async def settle(conn: Conn, message_id: MessageId, call_id: str, outcome: Decision) -> Decision:
    """Record `outcome` unless the user's decision is there, close the question; the decision."""
    params = {"message_id": message_id, "call_id": call_id, "decision": Jsonb(outcome)}
    await conn.execute(RECORD_SQL, params)
    await conn.execute(SETTLE_SQL, {"message_id": message_id})
    return await decision(conn, message_id, call_id) or outcome


async def record_decision(
    pool: Pool,
    claims: dict[str, Any],
    *,
    chat_id: ChatId,
    call_id: str,
    approved: bool,
    note: str | None,
) -> MessageId:
    """The owner's decision on a waiting call; returns the message that waits."""
    async with user_transaction(pool, claims) as conn:
        params = {"chat_id": chat_id, "call_id": call_id}
        row = await (await conn.execute(PENDING_SQL, params)).fetchone()
        if row is None:
            raise ApprovalNotFound(call_id)
        if row["decided"]:
            raise ApprovalAlreadyDecided(call_id)
        outcome = Decision(approved=approved, note=note, timed_out=False)
        params = {"message_id": row["id"], "call_id": call_id, "decision": Jsonb(outcome)}
        if await (await conn.execute(RECORD_SQL, params)).fetchone() is None:
            raise ApprovalAlreadyDecided(call_id)
    return MessageId(row["id"])
