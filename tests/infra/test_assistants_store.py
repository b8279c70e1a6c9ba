"""infra/store/assistants.py against the database, without the app: the catalogue kept in step
with the code, a chat's assistants with one default, and concurrent changes taking turns."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agent.assistants import Assistant
from infra.db import Pool
from infra.store.access import act_as_user
from infra.store.assistants import (
    AssistantNotInChat,
    ChatAssistant,
    LastAssistant,
    add_to_chat,
    chat_assistants,
    remove_from_chat,
    set_chat_assistants,
    sync_catalogue,
)
from infra.store.ids import ChatId
from tests.support import create_user_with_chat, fetch

CATALOGUE_SQL = "select id, name, description, retired_at is not null as retired from assistant"


async def test_the_catalogue_follows_the_code_and_keeps_what_it_no_longer_defines(
    pool: Pool, database_url: str
) -> None:
    first = [Assistant(id="a", name="A", description="one"), Assistant(id="b", name="B")]
    async with pool.connection() as conn:
        await sync_catalogue(conn, first)
        await sync_catalogue(conn, [Assistant(id="b", name="Bee", description="renamed")])
    rows = {r["id"]: r for r in await fetch(database_url, CATALOGUE_SQL)}
    assert rows["a"] == {"id": "a", "name": "A", "description": "one", "retired": True}
    assert rows["b"] == {"id": "b", "name": "Bee", "description": "renamed", "retired": False}

    async with pool.connection() as conn:  # defined again: back in service
        await sync_catalogue(conn, first)
    rows = {r["id"]: r for r in await fetch(database_url, CATALOGUE_SQL)}
    assert not rows["a"]["retired"]
    assert rows["b"]["name"] == "B"


async def _as_owner(pool: Pool, user_id: uuid.UUID, chat_id: ChatId) -> list[ChatAssistant]:
    async with pool.connection() as conn, conn.transaction():
        await act_as_user(conn, {"sub": str(user_id), "role": "authenticated"})
        return await chat_assistants(conn, chat_id, "fallback")


async def test_a_chat_without_rows_has_the_deployment_default_and_writes_it_down_on_a_change(
    pool: Pool, database_url: str
) -> None:
    user_id, raw_chat = await create_user_with_chat(database_url)
    chat_id = ChatId(raw_chat)
    assert await _as_owner(pool, user_id, chat_id) == [ChatAssistant("fallback", True)]

    async with pool.connection() as conn, conn.transaction():
        after = await add_to_chat(conn, chat_id, "b", make_default=False, fallback="fallback")
    assert after == [ChatAssistant("fallback", True), ChatAssistant("b", False)]
    assert await _as_owner(pool, user_id, chat_id) == after

    async with pool.connection() as conn, conn.transaction():
        after = await add_to_chat(conn, chat_id, "b", make_default=True, fallback="fallback")
    assert after == [ChatAssistant("fallback", False), ChatAssistant("b", True)]

    async with pool.connection() as conn, conn.transaction():
        after = await remove_from_chat(conn, chat_id, "b", fallback="fallback")
    assert after == [ChatAssistant("fallback", True)]  # the default passed on

    async with pool.connection() as conn, conn.transaction():
        with pytest.raises(LastAssistant):
            await remove_from_chat(conn, chat_id, "fallback", fallback="fallback")
    async with pool.connection() as conn, conn.transaction():
        with pytest.raises(AssistantNotInChat):
            await remove_from_chat(conn, chat_id, "nobody", fallback="fallback")


async def test_a_new_chat_gets_its_assistants_with_the_default_first(
    pool: Pool, database_url: str
) -> None:
    _, raw_chat = await create_user_with_chat(database_url)
    chat_id = ChatId(raw_chat)
    async with pool.connection() as conn, conn.transaction():
        made = await set_chat_assistants(conn, chat_id, ["x", "y", "x"], "y")
    assert made == [ChatAssistant("y", True), ChatAssistant("x", False)]


async def test_another_user_sees_none_of_a_chats_assistants(pool: Pool, database_url: str) -> None:
    _, raw_chat = await create_user_with_chat(database_url)
    stranger, _ = await create_user_with_chat(database_url)
    chat_id = ChatId(raw_chat)
    async with pool.connection() as conn, conn.transaction():
        await set_chat_assistants(conn, chat_id, ["x"], "y")
    # Under the stranger's RLS the chat has no rows: only the fallback shows, never x or y.
    assert await _as_owner(pool, stranger, chat_id) == [ChatAssistant("fallback", True)]


async def test_two_changes_to_one_chat_at_once_leave_exactly_one_default(
    database_url: str, pool: Pool
) -> None:
    _, raw_chat = await create_user_with_chat(database_url)
    chat_id = ChatId(raw_chat)

    async def make_default(assistant_id: str) -> None:
        async with pool.connection() as conn, conn.transaction():
            await add_to_chat(conn, chat_id, assistant_id, make_default=True, fallback="fallback")
            await asyncio.sleep(0.05)  # hold the lock while the other waits

    await asyncio.gather(make_default("p"), make_default("q"))
    rows = await fetch(
        database_url,
        "select assistant_id from chat_assistant where chat_id = %s and is_default",
        chat_id,
    )
    assert len(rows) == 1
    all_rows = await fetch(
        database_url, "select assistant_id from chat_assistant where chat_id = %s", chat_id
    )
    assert {r["assistant_id"] for r in all_rows} == {"fallback", "p", "q"}
