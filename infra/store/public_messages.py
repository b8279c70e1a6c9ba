"""A chat's public messages: what every assistant of a chat may read of the others.

Public are the users' messages and the assistants' final replies (`completed`, their content
alone); never a reply's tool calls, drafts or state, which stay in its own assistant's thread.
An assistant is given those it has not seen at the start of each of its turns (turns/context.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.db import Conn, fetch_rows
from infra.store.ids import ChatId, MessageId

# How far back a turn looks for messages its assistant has not seen: the newest this many.
LOOK_BACK = 50

# As the service, what `assistant_id` did not write and was not addressed: the users' messages
# to other assistants, the others' completed replies; none off its branch (`stale`), none from
# the instant of `before` on (the turn's message, or the one an edit replaces: the replies a
# message started are stored with it, at its instant). Newest first, for the look-back; user
# before reply at one instant, in chat order.
UNHEARD_SQL = """
select m.id, m.role, m.assistant_id, m.content from public.message m
where m.chat_id = %(chat_id)s and m.assistant_id <> %(assistant_id)s
  and not coalesce((m.metadata ->> 'stale')::boolean, false)
  and ((m.role = 'user'
        and not coalesce(m.metadata -> 'addressedTo', '[]'::jsonb) ? %(assistant_id)s)
       or (m.role = 'assistant' and m.status = 'completed' and m.content <> ''))
  and m.created_at < coalesce(
    (select b.created_at from public.message b where b.id = %(before)s), 'infinity')
order by m.created_at desc, m.role
limit %(limit)s
"""
# As the service: the chat's public messages among `ids` (a regenerated reply's context).
BY_IDS_SQL = """
select m.id, m.role, m.assistant_id, m.content from public.message m
where m.chat_id = %(chat_id)s and m.id = any(%(ids)s)
  and (m.role = 'user' or (m.status = 'completed' and m.content <> ''))
"""


@dataclass(frozen=True)
class PublicMessage:
    """A message every assistant of its chat may read; `assistant_id`: the reply's author, or
    the assistant a user's message went to."""

    id: MessageId
    role: Literal["user", "assistant"]
    assistant_id: str
    content: str


async def not_by(
    conn: Conn,
    *,
    chat_id: ChatId,
    assistant_id: str,
    before: MessageId,
) -> list[PublicMessage]:
    """The chat's newest public messages (LOOK_BACK) neither by nor to `assistant_id`, oldest
    first, from before the message `before` (all, while it is not stored yet)."""
    params = {
        "chat_id": chat_id,
        "assistant_id": assistant_id,
        "before": before,
        "limit": LOOK_BACK,
    }
    rows = await fetch_rows(conn, PublicMessage, UNHEARD_SQL, params)
    return rows[::-1]


async def by_ids(conn: Conn, *, chat_id: ChatId, ids: list[MessageId]) -> list[PublicMessage]:
    """The chat's public messages among `ids`, in the order of `ids`."""
    rows = await fetch_rows(conn, PublicMessage, BY_IDS_SQL, {"chat_id": chat_id, "ids": ids})
    found = {m.id: m for m in rows}
    return [found[i] for i in ids if i in found]
