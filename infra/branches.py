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

from infra.chat_store import CHAT_VISIBLE_SQL, ChatId, ChatNotFound, MessageId, user_transaction
from infra.db import Conn, Pool

MAIN_BRANCH = "main"

# Under the user's RLS: only a user message of their own chat and this assistant is editable.
EDIT_TARGET_SQL = """
select created_at, metadata from public.message
where id = %(message_id)s and chat_id = %(chat_id)s and assistant_id = %(assistant_id)s
  and role = 'user'
"""
CURRENT_BRANCH_SQL = """
select coalesce(metadata ->> 'branchId', 'main') as branch from public.message
where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s and id <> all(%(keep)s)
  and not coalesce((metadata ->> 'stale')::boolean, false)
order by created_at desc
limit 1
"""
MARK_TURN_SQL = """
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
HISTORY_SQL = """
select id, role, content, status, parent_message_id, metadata, created_at from public.message
where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s
order by created_at, role desc
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


async def record_turn(
    conn: Conn,
    *,
    chat_id: ChatId,
    assistant_id: str,
    user_message_id: MessageId,
    assistant_message_id: MessageId,
    base_checkpoint_id: str | None,
    head_checkpoint_id: str | None,
    edit: Edit | None,
) -> None:
    """Mark both messages of a turn with their checkpoints and branch; an edit also marks the
    old branch stale. Runs in the transaction that stores the turn's checkpoints."""
    keep = [user_message_id, assistant_message_id]
    if edit is None:
        params = {"chat_id": chat_id, "assistant_id": assistant_id, "keep": keep}
        row = await (await conn.execute(CURRENT_BRANCH_SQL, params)).fetchone()
        branch = row["branch"] if row else MAIN_BRANCH
        user_marks: dict[str, Any] = {"checkpointId": base_checkpoint_id, "branchId": branch}
    else:
        branch = str(user_message_id)
        user_marks = {
            "checkpointId": base_checkpoint_id,
            "branchId": branch,
            "editOf": str(edit.message_id),
        }
        await conn.execute(
            MARK_STALE_SQL,
            {"chat_id": chat_id, "assistant_id": assistant_id, "since": edit.since, "keep": keep},
        )
    await conn.execute(MARK_TURN_SQL, {"message_id": user_message_id, "marks": Jsonb(user_marks)})
    reply_marks = {"checkpointId": head_checkpoint_id, "branchId": branch}
    await conn.execute(
        MARK_TURN_SQL, {"message_id": assistant_message_id, "marks": Jsonb(reply_marks)}
    )


async def history(
    pool: Pool, claims: dict[str, Any], *, chat_id: ChatId, assistant_id: str
) -> list[dict[str, Any]]:
    """Every message of the chat's thread for this assistant, all branches, oldest first."""
    async with user_transaction(pool, claims) as conn:
        if await (await conn.execute(CHAT_VISIBLE_SQL, (chat_id,))).fetchone() is None:
            raise ChatNotFound(chat_id)
        params = {"chat_id": chat_id, "assistant_id": assistant_id}
        return await (await conn.execute(HISTORY_SQL, params)).fetchall()
