"""Which checkpoint each message belongs to, edits that fork the thread, and the history.

Every turn records on its user message the checkpoint it started from (`metadata.checkpointId`,
null for a thread's first turn) and on its reply the checkpoint it ended at, both with the
branch they are on (`metadata.branchId`, `main` until an edit). Editing a user message runs the
new turn from that message's starting checkpoint: LangGraph stores the new checkpoints beside
the old ones, the thread's latest checkpoint is the new branch's head, and the old branch's
messages stay, marked `metadata.stale`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from infra.db import Conn, Pool
from infra.store.access import user_transaction
from infra.store.chats import require_chat
from infra.store.ids import ChatId, MessageId
from infra.store.messages import MessageMetadata

MAIN_BRANCH = "main"

# Under the user's RLS: only a user message of their own chat and this assistant is editable.
EDIT_TARGET_SQL = """
select created_at, metadata from public.message
where id = %(message_id)s and chat_id = %(chat_id)s and assistant_id = %(assistant_id)s
  and role = 'user'
"""
# A turn that is no edit stays on the branch of the thread's latest live turn.
MARK_USER_MESSAGE_SQL = """
update public.message m
set metadata = m.metadata || %(marks)s::jsonb || jsonb_build_object('branchId', coalesce(
      %(branch)s,
      (select p.metadata ->> 'branchId' from public.message p
       where p.chat_id = m.chat_id and p.assistant_id = m.assistant_id and p.id <> m.id
         and p.metadata ? 'branchId' and not coalesce((p.metadata ->> 'stale')::boolean, false)
       order by p.created_at desc
       limit 1),
      'main')),
    updated_at = now()
where m.id = %(message_id)s
returning m.metadata ->> 'branchId' as branch
"""
MARK_REPLY_SQL = """
update public.message
set metadata = metadata || %(marks)s::jsonb, updated_at = now()
where id = %(message_id)s
"""
# The edited message and everything after it on this assistant's thread is the old branch.
MARK_STALE_SQL = """
update public.message
set metadata = metadata || '{"stale": true}'::jsonb, updated_at = now()
where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s
  and created_at >= %(since)s and id <> all(%(keep)s)
  and not coalesce((metadata ->> 'stale')::boolean, false)
"""
# A reply still in the background comes with its latest draft (a page loaded mid-round shows
# it rather than the quick path's text); an ended one with none.
# (either transport's draft: see infra/store/drafts.py)
HISTORY_SQL = """
select m.id, m.role, m.content, m.status, m.parent_message_id, m.metadata, m.created_at,
  d.draft_content, d.seq as draft_seq
from public.message m
left join lateral (
  select draft_content, seq from public.message_draft where message_id = m.id
  union all
  select draft_content, seq from public.broadcast_draft where message_id = m.id
  order by seq desc limit 1
) d on m.status in ('queued', 'streaming', 'awaiting_approval')
where m.chat_id = %(chat_id)s and m.assistant_id = %(assistant_id)s
order by m.created_at, m.role desc
"""


class EditTargetNotFound(LookupError):
    """The message to edit is not a user message of this chat and assistant."""


class NotEditable(RuntimeError):
    """The message was stored before turns recorded their checkpoints."""


@dataclass(frozen=True)
class Edit:
    """A turn that replaces `message_id` and runs from the checkpoint it started from."""

    message_id: MessageId
    base_checkpoint_id: str | None
    since: datetime


async def edit_target(
    pool: Pool, claims: dict[str, Any], *, chat_id: ChatId, assistant_id: str, message_id: UUID
) -> Edit:
    params = {"chat_id": chat_id, "assistant_id": assistant_id, "message_id": message_id}
    async with user_transaction(pool, claims) as conn:
        row = await (await conn.execute(EDIT_TARGET_SQL, params)).fetchone()
    if row is None:
        raise EditTargetNotFound(message_id)
    if "checkpointId" not in row["metadata"]:
        raise NotEditable(message_id)
    return Edit(MessageId(message_id), row["metadata"]["checkpointId"], row["created_at"])


async def mark_user_message(
    conn: Conn,
    *,
    chat_id: ChatId,
    assistant_id: str,
    message_id: MessageId,
    reply_id: MessageId,
    base_checkpoint_id: str | None,
    edit: Edit | None,
) -> str:
    """Record where the turn of `message_id` began and on which branch; returns the branch. An
    edit opens a branch of its own and marks the old one stale. Runs in the transaction that
    stores the turn's checkpoints; its reply carries the head checkpoint and the branch."""
    marks: dict[str, Any] = {"checkpointId": base_checkpoint_id}
    branch = None
    if edit is not None:
        branch = str(message_id)
        marks["editOf"] = str(edit.message_id)
        stale = {
            "chat_id": chat_id,
            "assistant_id": assistant_id,
            "since": edit.since,
            "keep": [message_id, reply_id],
        }
        await conn.execute(MARK_STALE_SQL, stale)
    params = {"message_id": message_id, "marks": Jsonb(marks), "branch": branch}
    row = await (await conn.execute(MARK_USER_MESSAGE_SQL, params)).fetchone()
    return str(row["branch"]) if row else MAIN_BRANCH


async def mark_reply(conn: Conn, message_id: MessageId, marks: MessageMetadata) -> None:
    await conn.execute(MARK_REPLY_SQL, {"message_id": message_id, "marks": Jsonb(marks)})


async def history(
    pool: Pool, claims: dict[str, Any], *, chat_id: ChatId, assistant_id: str
) -> list[dict[str, Any]]:
    """Every message of the chat's thread for this assistant, all branches, oldest first."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        params = {"chat_id": chat_id, "assistant_id": assistant_id}
        return await (await conn.execute(HISTORY_SQL, params)).fetchall()
