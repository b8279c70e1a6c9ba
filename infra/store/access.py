"""Who a statement runs as: the user, under RLS as PostgREST runs it, or the service.

User-scoped statements run after `set local role authenticated` with `request.jwt.claims`, so the
database's RLS policies decide what a user may see and write. Service statements (the background
function, the handoff) run as the connecting role.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NotRequired, TypedDict

from infra.db import Conn, Pool

# What PostgREST sets per request, in one statement: the claims, then `set local role`.
SET_REQUEST_SQL = """
select set_config('request.jwt.claims', %s, true), set_config('role', 'authenticated', true)
"""
# Back to the connecting role for the rest of a transaction that began as the user's.
SERVICE_ROLE_SQL = "select set_config('role', 'none', true)"


class Claims(TypedDict):
    """A request's verified JWT claims (a Supabase access token), which RLS reads: `sub` is the
    user. Every claim the token carries is kept, those not named here too, since the database's
    policies may read any of them."""

    sub: str
    role: str
    aud: NotRequired[str | list[str]]
    exp: NotRequired[int]
    iat: NotRequired[int]
    iss: NotRequired[str]
    email: NotRequired[str]
    session_id: NotRequired[str]


async def act_as_user(conn: Conn, claims: Claims) -> None:
    """For the rest of `conn`'s transaction, RLS sees the request's claims."""
    await conn.execute(SET_REQUEST_SQL, (json.dumps(claims),))


async def act_as_service(conn: Conn) -> None:
    """For the rest of `conn`'s transaction, statements run as the connecting role again."""
    await conn.execute(SERVICE_ROLE_SQL)


@asynccontextmanager
async def user_transaction(pool: Pool, claims: Claims) -> AsyncIterator[Conn]:
    """A transaction in which RLS sees the request's JWT claims, as PostgREST sets them."""
    async with pool.connection() as conn, conn.transaction():
        await act_as_user(conn, claims)
        yield conn
