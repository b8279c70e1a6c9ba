"""A user's chats, those they own and those they are a member of (infra/store/members.py): read
and deleted under their RLS (what supabase-js does on Supabase), created by the service."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from psycopg import errors

from infra.db import Conn, Pool, fetch_row, fetch_rows
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.ids import ChatId, UserId

CHAT_VISIBLE_SQL = "select id from public.chat where id = %s"
# Whether the caller owns the chat, under their RLS (a member sees the chat, not as its owner).
CHAT_OWNED_SQL = "select user_id = (select auth.uid()) as owned from public.chat where id = %s"
LIST_CHATS_SQL = """
select id, title, created_at, updated_at,
       case when user_id = (select auth.uid()) then 'owner' else 'member' end as role
from public.chat
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
returning id, title, created_at, updated_at, 'owner' as role
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
    role: str  # the caller's: `owner` or `member`


class ChatNotFound(LookupError):
    """The chat does not exist or is not the user's."""


class NotChatOwner(PermissionError):
    """The caller is a member of the chat, and the change is its owner's."""


class MessageNotFound(LookupError):
    """The message does not exist in the chat, or the chat is not the user's."""


class UnknownUser(LookupError):
    """The token is valid, but its user is not (or no longer) in auth.users."""


async def require_chat(conn: Conn, chat_id: ChatId) -> None:
    """ChatNotFound unless the chat is visible in `conn`'s transaction (under the user's RLS)."""
    if await (await conn.execute(CHAT_VISIBLE_SQL, (chat_id,))).fetchone() is None:
        raise ChatNotFound(chat_id)


async def require_owner(conn: Conn, chat_id: ChatId) -> None:
    """ChatNotFound unless the chat is visible in `conn`'s transaction (under the user's RLS);
    NotChatOwner when the user is a member of it but not its owner."""
    row = await (await conn.execute(CHAT_OWNED_SQL, (chat_id,))).fetchone()
    if row is None:
        raise ChatNotFound(chat_id)
    if not row["owned"]:
        raise NotChatOwner(chat_id)


async def list_chats(pool: Pool, claims: Claims, *, limit: int) -> list[ChatRow]:
    """The chats the user owns or is a member of, newest first, each with the user's role; RLS
    keeps everyone else's out."""
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
    """Delete the user's chat and everything in it; ChatNotFound unless they are in it,
    NotChatOwner when they are a member but not its owner."""
    async with user_transaction(pool, claims) as conn:
        await require_owner(conn, chat_id)
        if await (await conn.execute(DELETE_CHAT_SQL, (chat_id,))).fetchone() is None:
            raise ChatNotFound(chat_id)


async def delete_message(pool: Pool, claims: Claims, chat_id: ChatId, message_id: UUID) -> None:
    """Delete one message of a chat the user is in (its thread is cut there); MessageNotFound
    unless the chat holds it and it is the user's to delete: their own message, or any of the
    chat's when they own it."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        deleted = await (await conn.execute(DELETE_MESSAGE_SQL, (message_id, chat_id))).fetchone()
        if deleted is None:
            raise MessageNotFound(message_id)
