"""The people of `handoff dev` besides the demo user: `GET /api/dev/session?as=<email>` makes a
local user of that e-mail (as `seed_demo` makes the demo user), so a shared chat can be tried by
two people on one machine, each with a chat of their own to open.

On Supabase, Auth makes users; here the dev server writes `auth.users` itself, as the service.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from infra.db import Pool
from infra.store import chats
from infra.store.access import Claims
from infra.store.ids import ChatId, UserId

# Plain ASCII addresses (`bob@example.com`, `demo@handoff.local`): a local part, then a domain
# of one or more labels. Enough to tell an e-mail from a typo; nothing is ever sent to it.
EMAIL = re.compile(
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*"
)
MAX_EMAIL_CHARS = 254
# A local user's id, from their e-mail: the same person on every call, and at every restart.
LOCAL_USERS = uuid.UUID("6f1c2a52-5d0e-4c1f-9a53-3c1d7e0b8d21")

# One call at a time per e-mail: two first calls at once make one user and one chat.
LOCK_SQL = "select pg_advisory_xact_lock(hashtext('handoff.dev_user:' || %s))"
USER_BY_EMAIL_SQL = """
select id, email from auth.users where lower(email) = lower(%s) order by created_at, id limit 1
"""
CREATE_USER_SQL = "insert into auth.users (id, email) values (%s, %s) on conflict do nothing"
# Their first chat of their own (not one shared with them): the one the page opens.
OWN_CHAT_SQL = "select id from public.chat where user_id = %s order by created_at, id limit 1"


class NotAnEmail(ValueError):
    """What `?as=` names is no e-mail address."""


@dataclass(frozen=True)
class LocalUser:
    id: UserId
    email: str
    chat_id: ChatId


def local_email(text: str) -> str:
    """`text` as a local user's e-mail (lower case: one person whatever the case); NotAnEmail
    when it is none."""
    email = text.strip().lower()
    if len(email) > MAX_EMAIL_CHARS or not EMAIL.fullmatch(email):
        raise NotAnEmail(text)
    return email


async def local_user(pool: Pool, email: str) -> LocalUser:
    """The user of `email` (matched as members are, without regard to case), made if there is
    none, and their first own chat, made if they have none."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(LOCK_SQL, (email,))
        found = await (await conn.execute(USER_BY_EMAIL_SQL, (email,))).fetchone()
        if found is None:
            new_id = uuid.uuid5(LOCAL_USERS, email)
            await conn.execute(CREATE_USER_SQL, (new_id, email))
            found = await (await conn.execute(USER_BY_EMAIL_SQL, (email,))).fetchone()
        assert found is not None
        user_id = UserId(found["id"])
        chat = await (await conn.execute(OWN_CHAT_SQL, (user_id,))).fetchone()
        if chat is not None:
            return LocalUser(user_id, found["email"], ChatId(chat["id"]))
        claims: Claims = {"sub": str(user_id), "role": "authenticated"}
        created = await chats.create_chat(conn, claims, title=f"{found['email']}'s chat")
        assert created is not None
        return LocalUser(user_id, found["email"], created.id)
