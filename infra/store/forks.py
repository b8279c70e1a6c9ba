"""Forks of a thread: what an edit of a user message, or a reply answered again, starts from.

Either runs a new turn from the checkpoint the replaced turn began from in its assistant's
thread (an edited user message's `metadata.checkpointId`; a reply's `metadata.baseCheckpointId`,
which every addressee of a message records on its own reply), once that checkpoint is known to
be the chat's own; the branch the turn then makes is infra/store/branches.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar
from uuid import UUID

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from agent.threads import ThreadId, thread_key
from infra.db import Conn, Pool
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.admission import TO_CHAT
from infra.store.chats import require_chat
from infra.store.ids import ChatId, MessageId

# Under the user's RLS: only a user message they sent, in a chat of theirs, to this assistant is
# editable (in a shared chat, members read one another's messages, and edit their own).
# The saver's own table, by its key: whether the thread has this checkpoint (at the root
# namespace, where the graph's checkpoints live).
CHECKPOINT_EXISTS_SQL = """
select 1 from langgraph.checkpoints
where thread_id = %s and checkpoint_ns = '' and checkpoint_id = %s
"""
EDIT_TARGET_SQL = """
select created_at, metadata from public.message
where id = %(message_id)s and chat_id = %(chat_id)s and assistant_id = %(assistant_id)s
  and role = 'user' and sender_id = (select auth.uid())
"""
EDITED_ASSISTANT_SQL = """
select assistant_id from public.message
where id = %(message_id)s and chat_id = %(chat_id)s and role = 'user'
"""
# Under the user's RLS: the user message a reply of this assistant answers (or the message
# itself, when it was addressed to this assistant, first or further), its text and first
# addressee, and the reply of this assistant to replace: the one named, else the one on its
# active branch, else the newest.
REGENERATE_TARGET_SQL = """
select u.id, u.content, u.assistant_id, u.metadata, r.id as reply_id, r.metadata as reply_metadata
from public.message t
join public.message u
  on u.id = case when t.role = 'user' then t.id else t.parent_message_id end
  and u.role = 'user' and u.chat_id = t.chat_id
  and (u.assistant_id = %(assistant_id)s
       or coalesce(u.metadata -> 'addressedTo', '[]'::jsonb) ? %(assistant_id)s)
left join lateral (
  select r.id, r.metadata from public.message r
  where r.parent_message_id = u.id and r.role = 'assistant' and r.assistant_id = %(assistant_id)s
  order by r.id = t.id desc, coalesce((r.metadata ->> 'stale')::boolean, false), r.created_at desc
  limit 1
) r on true
where t.id = %(message_id)s and t.chat_id = %(chat_id)s
  and (t.role = 'user' or (t.role = 'assistant' and t.assistant_id = %(assistant_id)s))
"""

# Under the user's RLS: each further addressee of the user message that is still in the chat, and
# its reply to replace: the one on its active branch, else the newest.
FURTHER_REPLIES_SQL = """
select distinct on (r.assistant_id) r.assistant_id, r.id, r.metadata,
  u.metadata -> 'addressedTo' as addressed_to
from public.message u
join public.message r
  on r.parent_message_id = u.id and r.role = 'assistant' and r.chat_id = u.chat_id
  and r.assistant_id <> u.assistant_id
where u.id = %(message_id)s and u.chat_id = %(chat_id)s and u.role = 'user'
  and jsonb_typeof(u.metadata -> 'addressedTo') = 'array'
  and u.metadata -> 'addressedTo' ? r.assistant_id
  and exists (select 1 from public.chat_assistant a
              where a.chat_id = u.chat_id and a.assistant_id = r.assistant_id)
order by r.assistant_id, coalesce((r.metadata ->> 'stale')::boolean, false), r.created_at desc
"""


class EditTargetNotFound(LookupError):
    """The message to edit or answer again is not one of this chat and assistant."""


class NotEditable(RuntimeError):
    """The message was stored before turns recorded their checkpoints."""


class CheckpointNotFound(LookupError):
    """The message names a checkpoint its thread does not have: its metadata was not ours."""


@dataclass(frozen=True)
class Edit:
    """A turn that forks the thread from `base_checkpoint_id`, where the turn of the user message
    `message_id` began: with new content (an edit of that message) or with the same message
    again (`regenerate`). `forked_from` is the message the new branch replaces: the edited
    message, the reply answered again, or a further addressee's reply to the edited message.
    In a queued turn's payload (camelCase), for the background to fork as the quick path does."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(
        alias_generator=to_camel, populate_by_name=True
    )

    message_id: MessageId
    base_checkpoint_id: str | None
    forked_from: MessageId
    regenerate: bool = False


@dataclass(frozen=True)
class Regeneration:
    edit: Edit
    content: str  # the user message, asked again


async def edit_target(
    pool: Pool, claims: Claims, *, chat_id: ChatId, assistant_id: str, message_id: UUID
) -> Edit:
    params = {"chat_id": chat_id, "assistant_id": assistant_id, "message_id": message_id}
    async with user_transaction(pool, claims) as conn:
        row = await (await conn.execute(EDIT_TARGET_SQL, params)).fetchone()
        if row is None:
            raise EditTargetNotFound(message_id)
        if "checkpointId" not in row["metadata"]:
            raise NotEditable(message_id)
        base = await _fork_base(conn, chat_id, assistant_id, row["metadata"]["checkpointId"])
    edited = MessageId(message_id)
    return Edit(edited, base, edited)


async def edited_assistant(pool: Pool, claims: Claims, *, chat_id: ChatId, message_id: UUID) -> str:
    """The assistant the user message `message_id` of the chat went to first, read under RLS:
    an edit that names nobody goes there. EditTargetNotFound when there is no such message, and
    NotEditable for a message posted to the chat only, which started no turn to fork."""
    params = {"chat_id": chat_id, "message_id": message_id}
    async with user_transaction(pool, claims) as conn:
        row = await (await conn.execute(EDITED_ASSISTANT_SQL, params)).fetchone()
    if row is None:
        raise EditTargetNotFound(message_id)
    if row["assistant_id"] == TO_CHAT:
        raise NotEditable(message_id)
    return str(row["assistant_id"])


async def further_edits(
    pool: Pool, claims: Claims, *, chat_id: ChatId, message_id: UUID
) -> dict[str, Edit]:
    """What an edit of the user message `message_id` forks for each of its further addressees
    still in the chat, in mention order: that assistant's thread, from where its reply's turn
    began (`baseCheckpointId`), the new branch replacing that reply. An addressee whose reply
    recorded no start (its turn stored nothing, or was stored before replies recorded it) is
    left out; a start its thread does not have is CheckpointNotFound."""
    params = {"chat_id": chat_id, "message_id": message_id}
    edits: dict[str, Edit] = {}
    async with user_transaction(pool, claims) as conn:
        rows = await (await conn.execute(FURTHER_REPLIES_SQL, params)).fetchall()
        rows = [r for r in rows if "baseCheckpointId" in r["metadata"]]
        for row in sorted(rows, key=lambda r: r["addressed_to"].index(r["assistant_id"])):
            assistant_id = row["assistant_id"]
            recorded = row["metadata"]["baseCheckpointId"]
            base = await _fork_base(conn, chat_id, assistant_id, recorded)
            edits[assistant_id] = Edit(MessageId(message_id), base, MessageId(row["id"]))
    return edits


async def regenerate_target(
    pool: Pool, claims: Claims, *, chat_id: ChatId, assistant_id: str, message_id: UUID
) -> Regeneration:
    """What answering `message_id` (a reply of the assistant, or the user message it answers)
    again forks: the assistant's thread, from the checkpoint the replaced reply's turn began at
    (`baseCheckpointId`; for a reply stored before replies recorded it, its user message's
    `checkpointId`, when the message is the assistant's own)."""
    params = {"chat_id": chat_id, "assistant_id": assistant_id, "message_id": message_id}
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        row = await (await conn.execute(REGENERATE_TARGET_SQL, params)).fetchone()
        if row is None:
            raise EditTargetNotFound(message_id)
        if row["reply_id"] is None:
            raise NotEditable(message_id)
        if "baseCheckpointId" in row["reply_metadata"]:
            recorded = row["reply_metadata"]["baseCheckpointId"]
        elif row["assistant_id"] == assistant_id and "checkpointId" in row["metadata"]:
            recorded = row["metadata"]["checkpointId"]
        else:
            raise NotEditable(message_id)
        base = await _fork_base(conn, chat_id, assistant_id, recorded)
    edit = Edit(MessageId(row["id"]), base, MessageId(row["reply_id"]), regenerate=True)
    return Regeneration(edit, row["content"])


async def _fork_base(conn: Conn, chat_id: ChatId, assistant_id: str, base: object) -> str | None:
    """The checkpoint a message says its turn began from, once the assistant's thread is known
    to have it (None: the thread's first turn). Rows from before migration 0022 may hold
    metadata a user wrote through the Data API: a fork reads the chat's own thread only, and a
    checkpoint it does not have is CheckpointNotFound, not a failed turn."""
    if base is None:
        return None
    if not isinstance(base, str):
        raise CheckpointNotFound(base)
    # Checkpoints are not the user's to read: the rest of this transaction runs as the service.
    await act_as_service(conn)
    if not await has_checkpoint(conn, thread_key(chat_id, assistant_id), base):
        raise CheckpointNotFound(base)
    return base


async def has_checkpoint(conn: Conn, thread_id: ThreadId, checkpoint_id: str) -> bool:
    """Whether `thread_id` has the checkpoint `checkpoint_id`; the connection must act as the
    service (users cannot read checkpoints)."""
    found = await conn.execute(CHECKPOINT_EXISTS_SQL, (thread_id, checkpoint_id))
    return await found.fetchone() is not None
