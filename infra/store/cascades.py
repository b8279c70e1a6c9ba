"""Cascades (`public.cascade`): the regeneration of the replies that depend on an edit.

A cascade is requested by an edit in a chat of several assistants, once the edit's own replies
are started; `functions/cascade.py` runs it. Its row is the truth the function and the routes
share: `running`, `awaiting_approval` (the editor's card: `remaining` replies still depend on the
edit), then `completed`, `declined` (or the card timed out), `canceled` by the editor, or
`superseded` by a later edit in the same chat. A row whose event is not known sent
(`event_sent_at` null) is sent again by the outbox relay, with the same id.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from infra.db import Conn, Pool, fetch_row, fetch_rows
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.chats import require_chat
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.prompts import NotTurnStarter

CascadeStatus = Literal[
    "running", "awaiting_approval", "completed", "declined", "canceled", "superseded"
]
OPEN_STATUSES = ("running", "awaiting_approval")

# A later edit supersedes the chat's open cascades; then the new one is stored.
SUPERSEDE_SQL = """
update public.cascade set status = 'superseded', updated_at = now()
where chat_id = %(chat_id)s and status in ('running', 'awaiting_approval')
returning id
"""
INSERT_SQL = """
insert into public.cascade (id, chat_id, user_id, edited_message_id, replacement_id)
values (%(id)s, %(chat_id)s, %(user_id)s, %(edited)s, %(replacement)s)
"""
MARK_SENT_SQL = "update public.cascade set event_sent_at = now() where id = any(%s)"
UNSENT_SQL = """
select id, chat_id from public.cascade
where event_sent_at is null and status = 'running'
  and created_at < now() - make_interval(secs => %(older_than_s)s)
order by created_at limit %(limit)s
"""
GET_SQL = "select * from public.cascade where id = %(id)s"
LOCK_SQL = "select * from public.cascade where id = %(id)s for update"
SET_STATUS_SQL = """
update public.cascade set status = %(status)s, updated_at = now()
where id = %(id)s and status = any(%(from)s)
"""
ASK_SQL = """
update public.cascade set status = 'awaiting_approval', remaining = %(remaining)s,
  decision = null, updated_at = now()
where id = %(id)s and status = 'running'
"""
COUNT_SQL = """
update public.cascade set regenerated = regenerated + 1, updated_at = now() where id = %(id)s
"""
# Under the user's RLS: their chat's cascade that is open (`status`), for a decision or a cancel.
OPEN_OF_CHAT_SQL = """
select * from public.cascade
where id = %(id)s and chat_id = %(chat_id)s and status = any(%(statuses)s)
"""
DECIDE_SQL = """
update public.cascade set decision = %(decision)s, updated_at = now()
where id = %(id)s and status = 'awaiting_approval' and decision is null
"""
PENDING_SQL = """
select * from public.cascade
where chat_id = %(chat_id)s and status = 'awaiting_approval' order by created_at
"""


@dataclass(frozen=True)
class CascadeRow:
    id: uuid.UUID
    chat_id: ChatId
    user_id: UserId
    edited_message_id: MessageId
    replacement_id: MessageId
    status: CascadeStatus
    decision: str | None
    regenerated: int
    remaining: int
    event_sent_at: datetime | None
    created_at: datetime
    updated_at: datetime


class CascadeNotFound(LookupError):
    """No such cascade of the user's chat, or none that waits for this."""


class AlreadyDecided(RuntimeError):
    """The card was answered already."""


async def request(
    conn: Conn, *, chat_id: ChatId, user_id: UserId, edited: MessageId, replacement: MessageId
) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """Store a cascade for the edit of `edited` by `replacement`, superseding the chat's open
    ones (the service's connection): its id, and those superseded."""
    rows = await (await conn.execute(SUPERSEDE_SQL, {"chat_id": chat_id})).fetchall()
    cascade_id = uuid.uuid4()
    params = {"id": cascade_id, "chat_id": chat_id, "user_id": user_id}
    await conn.execute(INSERT_SQL, {**params, "edited": edited, "replacement": replacement})
    return cascade_id, [r["id"] for r in rows]


async def mark_sent(pool: Pool, ids: list[uuid.UUID]) -> None:
    async with pool.connection() as conn:
        await conn.execute(MARK_SENT_SQL, (ids,))


async def unsent(pool: Pool, *, older_than_s: float, limit: int) -> list[tuple[uuid.UUID, ChatId]]:
    """Running cascades whose event is not known sent, oldest first: (id, chat)."""
    async with pool.connection() as conn:
        params = {"older_than_s": older_than_s, "limit": limit}
        rows = await (await conn.execute(UNSENT_SQL, params)).fetchall()
    return [(r["id"], ChatId(r["chat_id"])) for r in rows]


async def get(conn: Conn, cascade_id: uuid.UUID, *, lock: bool = False) -> CascadeRow | None:
    return await fetch_row(conn, CascadeRow, LOCK_SQL if lock else GET_SQL, {"id": cascade_id})


async def set_status(
    conn: Conn, cascade_id: uuid.UUID, status: CascadeStatus, *, was: tuple[str, ...]
) -> bool:
    params = {"id": cascade_id, "status": status, "from": list(was)}
    return (await conn.execute(SET_STATUS_SQL, params)).rowcount > 0


async def ask(conn: Conn, cascade_id: uuid.UUID, remaining: int) -> bool:
    """The card: the cascade waits for the editor, `remaining` replies still depending."""
    params = {"id": cascade_id, "remaining": remaining}
    return (await conn.execute(ASK_SQL, params)).rowcount > 0


async def count_regenerated(conn: Conn, cascade_id: uuid.UUID) -> None:
    await conn.execute(COUNT_SQL, {"id": cascade_id})


async def decide(
    pool: Pool, claims: Claims, *, chat_id: ChatId, cascade_id: uuid.UUID, approved: bool
) -> None:
    """The editor's answer to the card, under their RLS for the lookup."""
    params = {"id": cascade_id, "chat_id": chat_id, "statuses": ["awaiting_approval"]}
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        row = await fetch_row(conn, CascadeRow, OPEN_OF_CHAT_SQL, params)
        if row is None:
            raise CascadeNotFound(cascade_id)
        if str(row.user_id) != claims["sub"]:
            # Its turns run as the editor's, on the editor's limits: theirs to let go on.
            raise NotTurnStarter(cascade_id)
        # The cascade is the service's to write.
        await act_as_service(conn)
        decision = "approved" if approved else "declined"
        decided = await conn.execute(DECIDE_SQL, {"id": cascade_id, "decision": decision})
        if row.decision is not None or decided.rowcount == 0:
            raise AlreadyDecided(cascade_id)


async def cancel(pool: Pool, claims: Claims, *, chat_id: ChatId, cascade_id: uuid.UUID) -> None:
    """A member stops the cascade: it regenerates nothing more (as any member may cancel a
    turn of the chat)."""
    params = {"id": cascade_id, "chat_id": chat_id, "statuses": list(OPEN_STATUSES)}
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        if await fetch_row(conn, CascadeRow, OPEN_OF_CHAT_SQL, params) is None:
            raise CascadeNotFound(cascade_id)
        await act_as_service(conn)
        await set_status(conn, cascade_id, "canceled", was=OPEN_STATUSES)


async def pending_of(pool: Pool, claims: Claims, chat_id: ChatId) -> list[CascadeRow]:
    """The chat's cards waiting for the editor, under their RLS."""
    async with user_transaction(pool, claims) as conn:
        return await fetch_rows(conn, CascadeRow, PENDING_SQL, {"chat_id": chat_id})
