"""What each reply depends on (`public.reply_source`), and which messages replaced which.

Every reply whose turn opened records the user message that started it (`started`) and each
public message it was given as context (`context`, in the order it heard them: turns/context.py),
in the transaction that stores the turn's first checkpoints (turns/engine.store_run). So the
replies that depend on a message are one lookup by `message_id`, and the closure of an edit (the
replies that heard what the edit replaced, then those that heard them, ...) one recursive query.

A message is replaced when an edit or a regeneration makes its successor: an edited user message
by the edit's message, a reply by the new reply of the same assistant to the same message. The old
row keeps `metadata.replacedBy`, the id of its successor; nothing is deleted. Following
`replacedBy` reads only rows of the same chat, whoever wrote the metadata it follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from infra.db import Conn, fetch_row, fetch_rows
from infra.store.ids import ChatId, MessageId

# The statement is `handoff.record_sources` (migration 0028), where its plan lasts the session.
RECORD_SQL = "select handoff.record_sources(%(reply_id)s, %(chat_id)s, %(ids)s::uuid[])"
# A new reply of an assistant to `message_id` (or to its edit) replaces that assistant's earlier
# replies to it which nothing replaced yet.
REPLACE_REPLIES_SQL = """
update public.message
set metadata = metadata || jsonb_build_object('replacedBy', %(new)s::text), updated_at = now()
where chat_id = %(chat_id)s and parent_message_id = %(message_id)s and role = 'assistant'
  and assistant_id = %(assistant_id)s and id <> %(new)s and not metadata ? 'replacedBy'
"""
REPLACE_SQL = """
update public.message
set metadata = metadata || jsonb_build_object('replacedBy', %(new)s::text), updated_at = now()
where chat_id = %(chat_id)s and id = %(old)s and id <> %(new)s
"""
# The replies that depend on the messages `seeds` (transitively: a reply that heard a dependent
# depends on the edit too), not yet replaced, in chat order; a reply started by a seed is the
# edit's own and left out.
DEPENDENTS_SQL = """
with recursive dep (id) as (
  select s.reply_id from public.reply_source s
  where s.message_id = any(%(seeds)s) and s.chat_id = %(chat_id)s and s.kind = 'context'
  union
  select s.reply_id from public.reply_source s join dep d on s.message_id = d.id
  where s.chat_id = %(chat_id)s and s.kind = 'context'
)
select m.id, m.assistant_id, m.parent_message_id, m.created_at,
  m.metadata ->> 'baseCheckpointId' as base_checkpoint_id,
  m.metadata ? 'baseCheckpointId' as recorded_base
from public.message m
where m.id in (select id from dep) and m.chat_id = %(chat_id)s and m.role = 'assistant'
  and not m.metadata ? 'replacedBy'
  and not exists (select 1 from public.reply_source s
                  where s.reply_id = m.id and s.kind = 'started' and s.message_id = any(%(seeds)s))
order by m.created_at, m.id
"""
REPLY_SQL = """
select m.id, m.assistant_id, m.parent_message_id, m.created_at,
  m.metadata ->> 'baseCheckpointId' as base_checkpoint_id,
  m.metadata ? 'baseCheckpointId' as recorded_base
from public.message m
where m.id = %(id)s and m.chat_id = %(chat_id)s and m.role = 'assistant'
  and m.parent_message_id is not null
"""
# What a reply heard, in order, each message by its latest replacement (same chat only).
CONTEXT_SQL = """
with recursive latest (orig, id, depth) as (
  select s.message_id, s.message_id, 0 from public.reply_source s
  where s.reply_id = %(reply_id)s and s.kind = 'context'
  union all
  select l.orig, n.id, l.depth + 1 from latest l
  join public.message o on o.id = l.id
  join public.message n
    on n.id::text = o.metadata ->> 'replacedBy' and n.chat_id = o.chat_id
  where l.depth < 100
)
select distinct on (s.position) l.id
from public.reply_source s
join latest l on l.orig = s.message_id
where s.reply_id = %(reply_id)s and s.kind = 'context'
order by s.position, l.depth desc
"""


@dataclass(frozen=True)
class Dependent:
    """A reply that heard something an edit replaced: what regenerating it needs."""

    id: MessageId
    assistant_id: str
    parent_message_id: MessageId
    created_at: datetime
    base_checkpoint_id: str | None
    recorded_base: bool


async def record(
    conn: Conn,
    *,
    chat_id: ChatId,
    reply_id: MessageId,
    started: MessageId,
    context: Sequence[MessageId],
) -> None:
    """The reply's sources: the message that started it, then what it heard, in order."""
    ids = [started, *(c for c in context if c != started)]
    params = {"reply_id": reply_id, "chat_id": chat_id, "ids": ids}
    await conn.execute(RECORD_SQL, params)


async def replace_replies(
    conn: Conn, *, chat_id: ChatId, assistant_id: str, message_id: MessageId, new: MessageId
) -> None:
    """`new` replaces the assistant's earlier replies to `message_id` that stand."""
    params = {"chat_id": chat_id, "assistant_id": assistant_id, "message_id": message_id}
    await conn.execute(REPLACE_REPLIES_SQL, {**params, "new": new})


async def replace(conn: Conn, *, chat_id: ChatId, old: MessageId, new: MessageId) -> None:
    """`new` replaces `old` (an edited user message)."""
    await conn.execute(REPLACE_SQL, {"chat_id": chat_id, "old": old, "new": new})


async def dependents(conn: Conn, chat_id: ChatId, seeds: Sequence[MessageId]) -> list[Dependent]:
    """The replies that depend on `seeds`, not replaced yet, in chat order."""
    params = {"chat_id": chat_id, "seeds": list(seeds)}
    return await fetch_rows(conn, Dependent, DEPENDENTS_SQL, params)


async def reply(conn: Conn, chat_id: ChatId, reply_id: MessageId) -> Dependent | None:
    """The reply `reply_id` of the chat, as a dependent to regenerate."""
    return await fetch_row(conn, Dependent, REPLY_SQL, {"id": reply_id, "chat_id": chat_id})


async def context_now(conn: Conn, reply_id: MessageId) -> list[MessageId]:
    """What `reply_id` heard, in order, each message by its latest replacement."""
    rows = await (await conn.execute(CONTEXT_SQL, {"reply_id": reply_id})).fetchall()
    return [MessageId(r["id"]) for r in rows]
