"""A user's chats: read and deleted under their RLS (what supabase-js does on Supabase), created
by the service."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from psycopg import errors

from infra.db import Conn, Pool, fetch_row, fetch_rows
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.ids import ChatId, UserId

CHAT_VISIBLE_SQL = "select id from public.chat where id = %s"
LIST_CHATS_SQL = """
select id, title, created_at, updated_at from public.chat
order by created_at desc, id
limit %s
"""
# The service inserts a chat, for the user the verified claims name: the Data API roles may not
# (migration 0017), since a chat created there would escape MAX_CHATS_PER_MINUTE. An id that
# exists already, whoever's chat it is, creates nothing (a seed run twice).
CREATE_CHAT_SQL = """
insert into public.chat (id, user_id, title)
values (coalesce(%s, gen_random_uuid()), %s, %s)
on conflict (id) do nothing
returning id, title, created_at, updated_at
"""
# Under the user's RLS, as a Supabase client deletes through the Data API: the database's
# triggers erase every copy of what goes (migration 0019; docs/reliability.md).
DELETE_CHAT_SQL = "delete from public.chat where id = %s returning id"
DELETE_MESSAGE_SQL = "delete from public.message where id = %s and chat_id = %s returning id"
ENSURE_USER_SQL = """
insert into auth.users (id, email) values (%s, %s) on conflict (id) do nothing
"""


@dataclass(frozen=True)
class ChatRow:
    id: ChatId
    title: str
    created_at: datetime
    updated_at: datetime


class ChatNotFound(LookupError):
    """The chat does not exist or is not the user's."""


class MessageNotFound(LookupError):
    """The message does not exist in the chat, or the chat is not the user's."""


class UnknownUser(LookupError):
    """The token is valid, but its user is not (or no longer) in auth.users."""


async def require_chat(conn: Conn, chat_id: ChatId) -> None:
    """ChatNotFound unless the chat is visible in `conn`'s transaction (under the user's RLS)."""
    if await (await conn.execute(CHAT_VISIBLE_SQL, (chat_id,))).fetchone() is None:
        raise ChatNotFound(chat_id)


async def list_chats(pool: Pool, claims: Claims, *, limit: int) -> list[ChatRow]:
    """The user's chats, newest first; RLS keeps everyone else's out."""
    async with user_transaction(pool, claims) as conn:
        return await fetch_rows(conn, ChatRow, LIST_CHATS_SQL, (limit,))


async def create_chat(
    conn: Conn, claims: Claims, *, title: str, chat_id: ChatId | None = None
) -> ChatRow | None:
    """A chat of the claims' user, in `conn`'s transaction, as the service (the caller counted
    it: infra/store/limits.admit); its row, or None when `chat_id` names a chat that exists
    already."""
    await act_as_service(conn)
    try:
        return await fetch_row(conn, ChatRow, CREATE_CHAT_SQL, (chat_id, claims["sub"], title))
    except errors.ForeignKeyViolation as exc:
        raise UnknownUser from exc


async def ensure_user(conn: Conn, user_id: UserId, email: str) -> None:
    """Service write for seeding; on Supabase, auth owns this table."""
    await conn.execute(ENSURE_USER_SQL, (user_id, email))


async def delete_chat(pool: Pool, claims: Claims, chat_id: ChatId) -> None:
    """Delete the user's chat and everything in it; ChatNotFound unless it is theirs."""
    async with user_transaction(pool, claims) as conn:
        if await (await conn.execute(DELETE_CHAT_SQL, (chat_id,))).fetchone() is None:
            raise ChatNotFound(chat_id)


async def delete_message(pool: Pool, claims: Claims, chat_id: ChatId, message_id: UUID) -> None:
    """Delete one message of the user's chat (its thread is cut there); MessageNotFound unless
    the chat is theirs and holds it."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        deleted = await (await conn.execute(DELETE_MESSAGE_SQL, (message_id, chat_id))).fetchone()
        if deleted is None:
            raise MessageNotFound(message_id)
