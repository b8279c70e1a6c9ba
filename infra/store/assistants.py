"""Assistants in the data: the catalogue of the code's assistants, and each chat's.

A chat with no `chat_assistant` rows has the deployment's default assistant only; the first
change to its assistants writes that one down, so a chat always keeps one default. Reads run
under the user's RLS; writes as the service, in the transaction that found the chat the user's,
after the chat's row is locked so that two changes to one chat's assistants take turns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.assistants import Assistant
from infra.db import Conn, fetch_rows
from infra.store.access import act_as_service
from infra.store.ids import ChatId, UserId

SYNC_SQL = """
insert into public.assistant (id, name, description, retired_at, updated_at)
values (%s, %s, %s, null, now())
on conflict (id) do update set
  name = excluded.name, description = excluded.description, retired_at = null,
  updated_at = now()
where (assistant.name, assistant.description, assistant.retired_at)
  is distinct from (excluded.name, excluded.description, null)
"""
RETIRE_SQL = """
update public.assistant set retired_at = now(), updated_at = now()
where retired_at is null and not (id = any (%s))
"""
CHAT_ASSISTANTS_SQL = """
select assistant_id, is_default from public.chat_assistant
where chat_id = %s
order by added_at, assistant_id
"""
# As the service, one statement on the path of every message: the chat's assistants and whether
# it is shared (has members), if `user_id` owns it or is a member (one row of nulls for the
# assistants: none written down), no row if not.
# One row, if the user owns the chat or is a member of it (migration 0027).
CHAT_ROUTE_SQL = "select * from handoff.chat_route(%(chat_id)s, %(user_id)s)"
LOCK_CHAT_SQL = "select 1 from public.chat where id = %s for no key update"
INSERT_SQL = """
insert into public.chat_assistant (chat_id, assistant_id, is_default) values (%s, %s, %s)
on conflict (chat_id, assistant_id) do nothing
"""
CLEAR_DEFAULT_SQL = (
    "update public.chat_assistant set is_default = false where chat_id = %s and is_default"
)
SET_DEFAULT_SQL = """
update public.chat_assistant set is_default = true where chat_id = %s and assistant_id = %s
"""
DELETE_SQL = "delete from public.chat_assistant where chat_id = %s and assistant_id = %s"


@dataclass(frozen=True)
class ChatAssistant:
    """An assistant taking part in a chat; `is_default` answers a message that names none."""

    assistant_id: str
    is_default: bool


class AssistantNotInChat(LookupError):
    """The assistant does not take part in the chat."""


class LastAssistant(RuntimeError):
    """Removing it would leave the chat with no assistant to answer."""


async def sync_catalogue(conn: Conn, assistants: Iterable[Assistant]) -> None:
    """`public.assistant` as the code defines `assistants`: each written, the rest retired."""
    ids: list[str] = []
    for a in assistants:
        await conn.execute(SYNC_SQL, (a.id, a.name, a.description))
        ids.append(a.id)
    await conn.execute(RETIRE_SQL, (ids,))


async def chat_assistants(conn: Conn, chat_id: ChatId, fallback: str) -> list[ChatAssistant]:
    """The chat's assistants, the earliest added first; `fallback` (the deployment's default)
    alone for a chat with none written down. Under whatever role `conn` acts as."""
    rows = await fetch_rows(conn, ChatAssistant, CHAT_ASSISTANTS_SQL, (chat_id,))
    return rows or [ChatAssistant(fallback, is_default=True)]


@dataclass(frozen=True)
class ChatRoute:
    """What routing reads of a chat: its assistants, and whether people other than its owner
    take part (then its assistants answer only those who name them)."""

    assistants: list[ChatAssistant]
    shared: bool


async def chat_route(
    conn: Conn, chat_id: ChatId, user_id: UserId, fallback: str
) -> ChatRoute | None:
    """The chat's assistants (as `chat_assistants` reads them) and whether it is shared, if
    `user_id` owns it or is a member; None if not. Checks that itself: `conn` may act as the
    service."""
    params = {"chat_id": chat_id, "user_id": user_id}
    row = await (await conn.execute(CHAT_ROUTE_SQL, params)).fetchone()
    return None if row is None else route_of(row, fallback)


def route_of(row: Mapping[str, Any], fallback: str) -> ChatRoute:
    """A chat's route from `handoff.chat_route`'s columns; `fallback` (the deployment's
    default) alone for a chat with no assistants written down."""
    pairs = zip(row["assistant_ids"], row["defaults"], strict=True)
    written = [ChatAssistant(a, d) for a, d in pairs]
    return ChatRoute(written or [ChatAssistant(fallback, is_default=True)], row["shared"])


async def set_chat_assistants(
    conn: Conn, chat_id: ChatId, assistant_ids: Iterable[str], default_id: str
) -> list[ChatAssistant]:
    """A new chat's assistants, `default_id` among them (the caller checked every id)."""
    await act_as_service(conn)
    for assistant_id in dict.fromkeys([default_id, *assistant_ids]):
        await conn.execute(INSERT_SQL, (chat_id, assistant_id, assistant_id == default_id))
    return await chat_assistants(conn, chat_id, default_id)


async def add_to_chat(
    conn: Conn, chat_id: ChatId, assistant_id: str, *, make_default: bool, fallback: str
) -> list[ChatAssistant]:
    """Add `assistant_id` to a chat the caller found the user's (adding one already there
    changes nothing but, with `make_default`, the default); the chat's assistants after."""
    await _written_down(conn, chat_id, fallback)
    await conn.execute(INSERT_SQL, (chat_id, assistant_id, False))
    if make_default:
        await conn.execute(CLEAR_DEFAULT_SQL, (chat_id,))
        await conn.execute(SET_DEFAULT_SQL, (chat_id, assistant_id))
    return await chat_assistants(conn, chat_id, fallback)


async def remove_from_chat(
    conn: Conn, chat_id: ChatId, assistant_id: str, *, fallback: str
) -> list[ChatAssistant]:
    """Remove `assistant_id` from a chat the caller found the user's; if it was the default,
    the earliest added of the others becomes it. AssistantNotInChat, or LastAssistant for the
    chat's only one. Its replies and thread stay."""
    present = await _written_down(conn, chat_id, fallback)
    if assistant_id not in {a.assistant_id for a in present}:
        raise AssistantNotInChat(assistant_id)
    if len(present) == 1:
        raise LastAssistant(assistant_id)
    await conn.execute(DELETE_SQL, (chat_id, assistant_id))
    remaining = await chat_assistants(conn, chat_id, fallback)
    if not any(a.is_default for a in remaining):
        await conn.execute(SET_DEFAULT_SQL, (chat_id, remaining[0].assistant_id))
        remaining = await chat_assistants(conn, chat_id, fallback)
    return remaining


async def _written_down(conn: Conn, chat_id: ChatId, fallback: str) -> list[ChatAssistant]:
    """As the service, with the chat's row locked: its assistants, the implicit default
    written down if it had none."""
    await act_as_service(conn)
    await conn.execute(LOCK_CHAT_SQL, (chat_id,))
    present = await chat_assistants(conn, chat_id, fallback)
    if len(present) == 1 and present[0].assistant_id == fallback:
        await conn.execute(INSERT_SQL, (chat_id, fallback, True))
    return present
