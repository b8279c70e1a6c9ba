"""A user's chats, read and created under their RLS (what supabase-js does on Supabase)."""

from __future__ import annotations

from typing import Any

from psycopg import errors

from infra.chat_store import user_transaction
from infra.db import Pool

LIST_CHATS_SQL = """
select id, title, created_at, updated_at from public.chat
order by created_at desc, id
limit %s
"""
# user_id comes from the claims, as a supabase-js insert relies on: the policy's check then
# holds by construction, and nobody can create a chat for somebody else.
CREATE_CHAT_SQL = """
insert into public.chat (user_id, title) values ((select auth.uid()), %s)
returning id, title, created_at, updated_at
"""


class UnknownUser(LookupError):
    """The token is valid, but its user is not (or no longer) in auth.users."""


async def list_chats(pool: Pool, claims: dict[str, Any], *, limit: int) -> list[dict[str, Any]]:
    """The user's chats, newest first; RLS keeps everyone else's out."""
    async with user_transaction(pool, claims) as conn:
        return await (await conn.execute(LIST_CHATS_SQL, (limit,))).fetchall()


async def create_chat(pool: Pool, claims: dict[str, Any], *, title: str) -> dict[str, Any]:
    try:
        async with user_transaction(pool, claims) as conn:
            row = await (await conn.execute(CREATE_CHAT_SQL, (title,))).fetchone()
    except errors.ForeignKeyViolation as exc:
        raise UnknownUser from exc
    assert row is not None
    return row
