"""A forged checkpoint in a user's own messages' metadata (the user message's `checkpointId`,
where an edit forks from, and its reply's `baseCheckpointId`, where answering it again does):
answering it again, or editing it.

Users could write their own message rows through Supabase's Data API before migration 0022, so
rows written then may carry the user's word for a checkpoint, not ours. A fork from it must
never read another thread's checkpoint, and a checkpoint the thread does not have is a plain
409, not a failed turn.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.security.server_log import describe, logged_exceptions
from tests.support import Api, create_user_with_chat, fetch, in_process_app, token_for

# What a refused fork could have left behind.
SNAPSHOT_SQL = """
select json_build_object(
  'message', (select json_agg(t order by t.id) from public.message t),
  'job_runs', (select json_agg(t order by t.id) from public.job_runs t),
  'branch', (select json_agg(t order by t.id) from public.branch t),
  'active_branch', (select json_agg(t order by t.chat_id) from public.active_branch t)
)::text as tables
"""
# A row as a user's PATCH could write it before migration 0022 (now refused: the service writes
# messages), written here as the database's owner.
FORGE_SQL = """
update public.message set metadata = jsonb_set(metadata, array[%s], %s)
where id = %s and exists (select 1 from chat c where c.id = chat_id and c.user_id = %s)
"""
FORGERIES = ["foreign", "garbage", "not-a-string"]


async def forge(
    database_url: str, user_id: uuid.UUID, message_id: str, key: str, value: Any
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn, conn.transaction():
        updated = await conn.execute(FORGE_SQL, (key, Jsonb(value), message_id, user_id))
        assert updated.rowcount == 1, "the user's own message"


async def say(stack: Api, token: str, chat_id: uuid.UUID, content: str) -> dict[str, Any]:
    events = await stack.respond(token, {"chatId": str(chat_id), "content": content})
    assert events[-1][0] == "done", events
    return events[0][1]


async def forged_turn(
    database_url: str, stack: Api, forgery: str
) -> tuple[uuid.UUID, uuid.UUID, str]:
    """GIVEN a victim's turn in their chat, and a user whose second message and its reply name,
    in place of their own checkpoints, `forgery`: the victim's checkpoint, garbage, or not a
    string at all.
    The user, their chat, and that message's id."""
    victim, victim_chat = await create_user_with_chat(database_url)
    await say(stack, token_for(victim), victim_chat, "the victim's private words")
    [reply] = await fetch(
        database_url,
        "select metadata ->> 'checkpointId' as checkpoint from message"
        " where chat_id = %s and role = 'assistant'",
        victim_chat,
    )
    user_id, chat_id = await create_user_with_chat(database_url)
    await say(stack, token_for(user_id), chat_id, "first")
    second = await say(stack, token_for(user_id), chat_id, "second")
    value: Any = {
        "foreign": reply["checkpoint"],
        "garbage": "1f0-not-a-checkpoint",
        "not-a-string": {"checkpoint_id": reply["checkpoint"]},
    }[forgery]
    await forge(database_url, user_id, second["userMessageId"], "checkpointId", value)
    await forge(database_url, user_id, second["assistantMessageId"], "baseCheckpointId", value)
    return user_id, chat_id, second["userMessageId"]


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "checkpoint_not_found"
    assert "private words" not in response.text


@pytest.mark.parametrize("forgery", FORGERIES)
async def test_regenerating_from_a_forged_checkpoint_is_refused(
    database_url: str, forgery: str
) -> None:
    async with in_process_app(database_url) as stack:
        user_id, chat_id, message_id = await forged_turn(database_url, stack, forgery)
        before = await fetch(database_url, SNAPSHOT_SQL)
        # WHEN the user asks for that message to be answered again
        with logged_exceptions() as exceptions:
            response = await stack.regenerate_response(token_for(user_id), chat_id, message_id)
        # THEN it is refused with a plain code, nothing is stored, and no bug is logged
        assert_refused(response)
        assert await fetch(database_url, SNAPSHOT_SQL) == before
        assert exceptions == [], describe(exceptions)


@pytest.mark.parametrize("forgery", FORGERIES)
async def test_editing_a_message_with_a_forged_checkpoint_is_refused(
    database_url: str, forgery: str
) -> None:
    async with in_process_app(database_url) as stack:
        user_id, chat_id, message_id = await forged_turn(database_url, stack, forgery)
        before = await fetch(database_url, SNAPSHOT_SQL)
        # WHEN the user sends an edit of that message
        with logged_exceptions() as exceptions:
            response = await stack.respond_response(
                token_for(user_id),
                {"chatId": str(chat_id), "content": "edited", "editOf": message_id},
            )
        # THEN it is refused with a plain code, nothing is stored, and no bug is logged
        assert_refused(response)
        assert await fetch(database_url, SNAPSHOT_SQL) == before
        assert exceptions == [], describe(exceptions)
        # AND the chat still takes the next message, on the thread it had
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "third"}
        )
        assert events[-1][0] == "done", events
