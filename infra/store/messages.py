"""Rows of `message`: the user's messages and the replies, with what their metadata holds."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from psycopg.types.json import Jsonb

from infra.db import Conn
from infra.store.ids import ChatId, MessageId

MessageStatus = Literal[
    "queued", "streaming", "awaiting_approval", "completed", "error", "canceled"
]
# What a reply is inserted as: streaming on its quick path, or queued for the background.
ReplyStatus = Literal["streaming", "queued"]
# How a quick path leaves its reply: handed to the background, or ended.
SettledStatus = Literal["queued", "completed"]


class MessageMetadata(TypedDict, total=False):
    """Every key written to `message.metadata`."""

    model: str | None  # the reply's model
    runId: str  # the quick path's LangGraph run
    # The checkpoint a user message's turn started from (null: the thread's first turn); on a
    # reply, the one it ended at (infra/store/branches.py).
    checkpointId: str | None
    branchId: str
    stale: bool  # on a branch an edit left
    snapshot: dict[str, Any]  # agent.snapshot's status and tool progress, for subscribers
    pendingApproval: dict[str, Any]  # the tool call waiting for the user (approvals.py)
    approvals: dict[str, Any]  # the user's decisions, by tool call id
    editOf: str  # on a user message that replaced another (an edit)
    usage: dict[str, Any]  # the turn's token usage, per model call and summed (agent/usage.py)


class DuplicateMessage(RuntimeError):
    """A message with this id already exists."""


# Under the user's RLS: the message goes in only if the chat is theirs.
STORE_USER_MESSAGE_SQL = """
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
INSERT_REPLY_SQL = """
insert into public.message
  (id, chat_id, assistant_id, role, content, status, parent_message_id, metadata, handoff_event_id)
values (%s, %s, %s, 'assistant', %s, %s, %s, %s, %s)
"""
# The quick path's end: the reply's text, status and marks (its job's transition, in the same
# transaction, is the fence). `metadata` adds to what the reply was inserted with.
SETTLE_SQL = """
update public.message
set content = %s, status = %s, metadata = metadata || %s, handoff_event_id = %s,
    updated_at = now()
where id = %s and status = 'streaming'
"""
# A quick path that lost its slot: the canceled reply keeps all that its stream showed, which
# may be more than the draft the cancel kept.
SHOWN_SQL = """
update public.message set content = %s, updated_at = now() where id = %s and status = 'canceled'
"""
# The background job's progress (agent status, tool calls) for subscribers; an ended message
# keeps the snapshot it ended with.
RECORD_SNAPSHOT_SQL = """
update public.message
set metadata = metadata || jsonb_build_object('snapshot', %s::jsonb), updated_at = now()
where id = %s and status in ('queued', 'streaming', 'awaiting_approval')
"""
STREAMING_SQL = """
update public.message set status = 'streaming', updated_at = now()
where id = %s and status in ('queued', 'error', 'streaming')
"""
# The reply's checkpoint is the thread's head once the job ends (infra/store/branches.py).
COMPLETE_SQL = """
update public.message
set content = %s, status = 'completed', updated_at = now(),
    metadata = metadata || jsonb_build_object('checkpointId', %s::text, 'usage', %s::jsonb)
where id = %s
"""
FAIL_SQL = """
update public.message set content = %s, status = 'error', updated_at = now()
where id = %s and status <> 'completed'
"""
# The message keeps what the user saw: its latest draft, else the text the quick path streamed.
# (either transport's: see infra/store/drafts.py)
CANCEL_SQL = """
update public.message m
set content = coalesce(
      (select d.draft_content from (
        select draft_content, seq from public.message_draft where message_id = m.id
        union all
        select draft_content, seq from public.broadcast_draft where message_id = m.id
      ) d order by d.seq desc limit 1),
      m.content),
    status = 'canceled', updated_at = now()
where m.id = %s and m.status in ('queued', 'streaming', 'awaiting_approval')
"""


async def store_user_message(
    conn: Conn, *, chat_id: ChatId, assistant_id: str, message_id: MessageId, content: str
) -> bool:
    """Insert the user's message, under the user's RLS; False when the chat is not theirs.

    DuplicateMessage when the id is taken (a retried send, or a guess at another's id)."""
    params = {
        "chat_id": chat_id,
        "assistant_id": assistant_id,
        "message_id": message_id,
        "content": content,
    }
    row = await (await conn.execute(STORE_USER_MESSAGE_SQL, params)).fetchone()
    if row is None or not row["visible"]:
        return False
    if not row["inserted"]:
        raise DuplicateMessage(message_id)
    return True


async def insert_reply(
    conn: Conn,
    *,
    message_id: MessageId,
    chat_id: ChatId,
    assistant_id: str,
    content: str,
    status: ReplyStatus,
    parent_id: MessageId,
    metadata: MessageMetadata,
    handoff_event_id: str | None = None,
) -> None:
    params = (
        message_id,
        chat_id,
        assistant_id,
        content,
        status,
        parent_id,
        Jsonb(metadata),
        handoff_event_id,
    )
    await conn.execute(INSERT_REPLY_SQL, params)


async def settle(
    conn: Conn,
    message_id: MessageId,
    *,
    content: str,
    status: SettledStatus,
    metadata: MessageMetadata,
    handoff_event_id: str | None,
) -> None:
    await conn.execute(SETTLE_SQL, (content, status, Jsonb(metadata), handoff_event_id, message_id))


async def keep_shown(conn: Conn, message_id: MessageId, content: str) -> None:
    """The canceled reply's text is `content`, all that its quick path streamed."""
    await conn.execute(SHOWN_SQL, (content, message_id))


async def record_snapshot(conn: Conn, message_id: MessageId, snapshot: dict[str, Any]) -> None:
    await conn.execute(RECORD_SNAPSHOT_SQL, (Jsonb(snapshot), message_id))


async def mark_streaming(conn: Conn, message_id: MessageId) -> None:
    await conn.execute(STREAMING_SQL, (message_id,))


async def complete(
    conn: Conn,
    message_id: MessageId,
    *,
    content: str,
    checkpoint_id: str | None,
    usage: dict[str, Any],
) -> None:
    await conn.execute(COMPLETE_SQL, (content, checkpoint_id, Jsonb(usage), message_id))


async def fail(conn: Conn, message_id: MessageId, user_text: str) -> None:
    """The reply says `user_text`, unless it completed already."""
    await conn.execute(FAIL_SQL, (user_text, message_id))


async def cancel(conn: Conn, message_id: MessageId) -> None:
    """The reply ends `canceled` with the text its user saw, unless it ended already."""
    await conn.execute(CANCEL_SQL, (message_id,))
