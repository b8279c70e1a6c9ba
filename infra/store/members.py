"""Who is in a chat: its owner (`chat.user_id`) and its members (`public.chat_member`,
migration 0022).

Members read everything of the chat and send to it; only the owner adds and removes members
(a member may leave), renames and deletes the chat. Membership is written by the service only:
every change locks the chat's row first, so adds sent together cannot pass
MAX_MEMBERS_PER_CHAT, and a removal is seen by the next statement of every other transaction
(the policies ask `handoff.is_chat_member` each time).

Adding to a chat the caller does not own and adding a user who does not exist give the same
answer (MemberNotAdded), so that neither tells the caller whether the other exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import UUID

from infra.db import Conn, Pool, fetch_rows
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.chats import ChatNotFound, NotChatOwner, require_chat
from infra.store.ids import ChatId

Role = Literal["owner", "member"]

# As the service, once the caller is known to be in the chat: the owner first, then the
# members in the order they were added.
MEMBERS_SQL = """
select c.user_id, u.email, 'owner' as role, c.created_at as added_at, 0 as n
from public.chat c left join auth.users u on u.id = c.user_id
where c.id = %(chat_id)s
union all
select m.user_id, u.email, 'member', m.created_at, 1
from public.chat_member m left join auth.users u on u.id = m.user_id
where m.chat_id = %(chat_id)s
order by n, added_at, user_id
"""
# Not `for update`: the foreign-key checks of the chat's messages and jobs take key-share
# locks, which that would make wait behind a change of members.
LOCK_CHAT_SQL = "select user_id from public.chat where id = %s for no key update"
FIND_USER_SQL = """
select id, email from auth.users
where (%(user_id)s::uuid is not null and id = %(user_id)s)
   or (%(email)s::text is not null and lower(email) = lower(%(email)s))
order by id limit 1
"""
COUNT_SQL = "select count(*) as n from public.chat_member where chat_id = %s"
ADD_SQL = """
insert into public.chat_member (chat_id, user_id, added_by) values (%s, %s, %s)
on conflict (chat_id, user_id) do nothing
returning created_at
"""
MEMBER_SQL = "select created_at from public.chat_member where chat_id = %s and user_id = %s"
REMOVE_SQL = "delete from public.chat_member where chat_id = %s and user_id = %s returning 1"


@dataclass(frozen=True)
class MemberRow:
    user_id: UUID
    email: str | None
    role: Role
    added_at: datetime


class MemberNotAdded(LookupError):
    """The chat is not the caller's, or the user does not exist: the same answer for both."""


class OwnerStays(RuntimeError):
    """The owner cannot be removed from their chat (they may delete it)."""


class MemberNotFound(LookupError):
    """The user is not a member of the chat."""


class TooManyMembers(ValueError):
    """The chat has MAX_MEMBERS_PER_CHAT members already."""


async def list_members(pool: Pool, claims: Claims, chat_id: ChatId) -> list[MemberRow]:
    """The chat's owner and members; ChatNotFound unless the caller is one of them."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        await act_as_service(conn)
        rows = await fetch_rows(conn, _Row, MEMBERS_SQL, {"chat_id": chat_id})
    return [MemberRow(r.user_id, r.email, r.role, r.added_at) for r in rows]


@dataclass(frozen=True)
class _Row:
    user_id: UUID
    email: str | None
    role: Role
    added_at: datetime
    n: int


async def add_member(
    pool: Pool,
    claims: Claims,
    chat_id: ChatId,
    *,
    user_id: UUID | None,
    email: str | None,
    max_members: int,
) -> tuple[MemberRow, bool]:
    """Add the user named by id or e-mail to the caller's chat; the member, and whether they
    were added now (False: they were in it already, the owner included).

    MemberNotAdded when the chat is not the caller's or the user does not exist; TooManyMembers
    when the chat has `max_members` members already."""
    async with pool.connection() as conn, conn.transaction():
        owner = await _lock_chat(conn, chat_id)
        if owner is None or str(owner) != claims["sub"]:
            raise MemberNotAdded(chat_id)
        params = {"user_id": user_id, "email": email}
        found = await (await conn.execute(FIND_USER_SQL, params)).fetchone()
        if found is None:
            raise MemberNotAdded(chat_id)
        target, target_email = found["id"], found["email"]
        if target == owner:
            return await _owner_row(conn, chat_id), False
        existing = await (await conn.execute(MEMBER_SQL, (chat_id, target))).fetchone()
        if existing is not None:
            return MemberRow(target, target_email, "member", existing["created_at"]), False
        count = await (await conn.execute(COUNT_SQL, (chat_id,))).fetchone()
        if count is not None and count["n"] >= max_members:
            raise TooManyMembers(chat_id)
        added = await (await conn.execute(ADD_SQL, (chat_id, target, owner))).fetchone()
        assert added is not None  # the chat's row is locked: no one added them meanwhile
        return MemberRow(target, target_email, "member", added["created_at"]), True


async def remove_member(pool: Pool, claims: Claims, chat_id: ChatId, user_id: UUID) -> None:
    """Remove a member: the owner removes anyone, a member themself (leaving). ChatNotFound
    unless the caller is in the chat; NotChatOwner for a member removing someone else;
    OwnerStays for the owner; MemberNotFound when the user is not a member."""
    caller = UUID(claims["sub"])
    async with pool.connection() as conn, conn.transaction():
        owner = await _lock_chat(conn, chat_id)
        if owner is None:
            raise ChatNotFound(chat_id)
        if caller != owner:
            if await (await conn.execute(MEMBER_SQL, (chat_id, caller))).fetchone() is None:
                raise ChatNotFound(chat_id)
            if user_id != caller:
                raise NotChatOwner(chat_id)
        if user_id == owner:
            raise OwnerStays(chat_id)
        if await (await conn.execute(REMOVE_SQL, (chat_id, user_id))).fetchone() is None:
            raise MemberNotFound(user_id)


async def _lock_chat(conn: Conn, chat_id: ChatId) -> UUID | None:
    """The chat's owner, with its row locked until the transaction ends; None: no such chat."""
    row = await (await conn.execute(LOCK_CHAT_SQL, (chat_id,))).fetchone()
    return None if row is None else UUID(str(row["user_id"]))


async def _owner_row(conn: Conn, chat_id: ChatId) -> MemberRow:
    rows = await fetch_rows(conn, _Row, MEMBERS_SQL, {"chat_id": chat_id})
    owner = rows[0]
    return MemberRow(owner.user_id, owner.email, "owner", owner.added_at)
