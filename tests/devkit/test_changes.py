"""GET /api/dev/chat/{chatId}/changes: the development stand-in for Realtime, over HTTP."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from devkit import changes
from tests.support import (
    Stack,
    create_user_with_chat,
    execute,
    fetch,
    insert_message,
    running_stack,
    token_for,
    write_draft,
)

Event = tuple[str, Any]
SLOTS_SQL = "select slot_name from pg_replication_slots where database = current_database()"


class Events:
    """An SSE stream read event by event; a comment reads as ("comment", its text)."""

    def __init__(self, lines: AsyncIterator[str]) -> None:
        self._lines = lines

    async def next(self) -> Event:
        fields: dict[str, str] = {}
        async with asyncio.timeout(20):
            async for line in self._lines:
                if line.startswith(":"):
                    return "comment", line[1:].strip()
                if line:
                    name, _, value = line.partition(": ")
                    fields[name] = value
                elif fields:
                    return fields["event"], json.loads(fields["data"])
        raise AssertionError(f"the stream ended: {fields}")

    async def changes(self, count: int) -> list[dict[str, Any]]:
        """The next `count` postgres_changes payloads (keepalives skipped)."""
        received: list[dict[str, Any]] = []
        while len(received) < count:
            event, data = await self.next()
            if event == "postgres_changes":
                received.append(data)
            elif event != "comment":
                raise AssertionError(f"unexpected {event}: {data}")
        return received

    async def until(self, found: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Every change up to and including the first `found` accepts."""
        received: list[dict[str, Any]] = []
        while not received or not found(received[-1]):
            received.extend(await self.changes(1))
        return received


@asynccontextmanager
async def changes_stack(database_url: str, **settings: Any) -> AsyncIterator[Stack]:
    """The app with the dev change feed route, as `handoff dev` serves it."""
    async with running_stack(database_url, **settings) as stack:
        stack.app.include_router(changes.router)
        yield stack  # the app's shutdown closes the feed


def url_of(chat_id: uuid.UUID) -> str:
    return f"/api/dev/chat/{chat_id}/changes"


@asynccontextmanager
async def subscribed(stack: Stack, user_id: uuid.UUID, chat_id: uuid.UUID) -> AsyncIterator[Events]:
    """An open stream of the chat's changes, past its `subscribed` event."""
    headers = {"Authorization": f"Bearer {token_for(user_id)}"}
    async with stack.http.stream("GET", url_of(chat_id), headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        events = Events(response.aiter_lines())
        assert await events.next() == ("subscribed", {"chatId": str(chat_id)})
        yield events


async def wait_until_no_slots(database_url: str) -> None:
    async with asyncio.timeout(20):
        # Polls: the server learns of the hang-up on its own time, and signals nothing here.
        while await fetch(database_url, SLOTS_SQL):  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_rows_written_in_the_chat_stream_as_realtime_payloads(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with changes_stack(url) as stack, subscribed(stack, user_id, chat_id) as events:
        # WHEN a message and its draft are inserted and updated
        message_id = await insert_message(url, chat_id, "", model="scripted")
        await write_draft(url, message_id, chat_id, "draft 1", 1)
        await write_draft(url, message_id, chat_id, "draft 2", 2)
        await execute(url, "update public.message set content = 'done' where id = %s", message_id)
        received = await events.changes(4)

    # THEN each arrives as supabase-js's RealtimePostgresChangesPayload, values typed
    assert [(c["table"], c["eventType"]) for c in received] == [
        ("message", "INSERT"),
        ("message_draft", "INSERT"),
        ("message_draft", "UPDATE"),
        ("message", "UPDATE"),
    ]
    inserted = received[0]
    assert inserted["schema"] == "public"
    assert inserted["old"] == {}
    assert inserted["errors"] is None
    assert inserted["new"]["metadata"] == {"model": "scripted"}
    assert inserted["new"]["id"] == str(message_id)
    assert received[2]["new"]["seq"] == 2
    assert received[2]["new"]["draft_content"] == "draft 2"
    assert received[3]["new"]["content"] == "done"
    assert all(c["commit_timestamp"].endswith("Z") for c in received)


async def test_a_background_turn_shows_on_the_stream_until_its_reply_completes(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with changes_stack(url) as stack, subscribed(stack, user_id, chat_id) as events:
        # WHEN a message hands a tool call off to the background
        sent = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 6*7"}
        )
        assert sent[-1][0] == "handoff"
        reply_id = sent[0][1]["assistantMessageId"]

        # THEN the stream shows the reply's rows until it is completed
        def completed(change: dict[str, Any]) -> bool:
            new = change["new"]
            return change["table"] == "message" and (new["id"], new["status"]) == (
                reply_id,
                "completed",
            )

        received = await events.until(completed)
    [final] = await fetch(url, "select content from public.message where id = %s", reply_id)
    assert received[-1]["new"]["content"] == final["content"]
    assert "42" in final["content"]
    # (its drafts may not show: the round ends within a poll, and a draft gone by the time its
    # change is checked against RLS is not sent, as with Realtime)
    statuses = [c["new"]["status"] for c in received if c["new"].get("id") == reply_id]
    # (streaming on the quick path, queued for the background, streaming there, completed)
    assert (statuses[0], statuses[-1]) == ("streaming", "completed")
    assert "queued" in statuses
    assert {c["new"]["chat_id"] for c in received} == {str(chat_id)}


async def test_each_user_receives_only_their_own_chat(logical_database_url: str) -> None:
    url = logical_database_url
    alice, alices_chat = await create_user_with_chat(url)
    bob, bobs_chat = await create_user_with_chat(url)
    async with (
        changes_stack(url) as stack,
        subscribed(stack, alice, alices_chat) as to_alice,
        subscribed(stack, bob, bobs_chat) as to_bob,
    ):
        # WHEN both chats change, Bob's first
        await insert_message(url, bobs_chat, "for bob")
        await insert_message(url, alices_chat, "for alice")
        # THEN each sees only their own (a leak would come first: changes arrive in order)
        [alices] = await to_alice.changes(1)
        [bobs] = await to_bob.changes(1)
        # AND a chat that is not yours does not exist, as elsewhere in the API
        response = await stack.http.get(
            url_of(bobs_chat), headers={"Authorization": f"Bearer {token_for(alice)}"}
        )
    assert alices["new"]["content"] == "for alice"
    assert bobs["new"]["content"] == "for bob"
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "chat_not_found", "message": "Chat not found."}}


async def test_another_chat_of_the_same_user_stays_off_this_stream(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    other_chat = uuid.uuid4()
    await execute(url, "insert into public.chat (id, user_id) values (%s, %s)", other_chat, user_id)
    async with changes_stack(url) as stack, subscribed(stack, user_id, chat_id) as events:
        await insert_message(url, other_chat, "elsewhere")
        await insert_message(url, chat_id, "here")
        [change] = await events.changes(1)
    assert change["new"]["content"] == "here"


async def test_every_change_after_subscribed_arrives_in_order(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    message_id = await insert_message(url, chat_id, "")
    async with changes_stack(url) as stack, subscribed(stack, user_id, chat_id) as events:
        # GIVEN the stream said `subscribed`; WHEN many updates commit at once after it
        for seq in range(1, 101):
            await write_draft(url, message_id, chat_id, f"draft {seq}", seq)
        received = await events.changes(100)
    # THEN every one arrives, in commit order
    assert [c["new"]["seq"] for c in received] == list(range(1, 101))


async def test_the_slot_is_released_when_the_last_stream_ends(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with changes_stack(url) as stack:
        async with subscribed(stack, user_id, chat_id), subscribed(stack, user_id, chat_id):
            assert len(await fetch(url, SLOTS_SQL)) == 1
        # WHEN both clients hang up, THEN the slot goes (no WAL kept for nobody)
        await wait_until_no_slots(url)


async def test_a_stream_the_feed_ends_says_why(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with changes_stack(url) as stack, subscribed(stack, user_id, chat_id) as events:
        # WHEN the app shuts the feed down
        await stack.app.state.change_feed.close()
        # THEN the stream ends with an error event
        assert await events.next() == (
            "error",
            {"code": "change_feed_closed", "message": "The server is shutting down."},
        )
    assert await fetch(url, SLOTS_SQL) == []


async def test_a_quiet_stream_sends_keepalives(
    logical_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes, "KEEPALIVE_S", 0.01)
    user_id, chat_id = await create_user_with_chat(logical_database_url)
    async with (
        changes_stack(logical_database_url) as stack,
        subscribed(stack, user_id, chat_id) as events,
    ):
        assert await events.next() == ("comment", "keepalive")


async def test_a_server_without_logical_decoding_answers_503_with_the_fix(
    replica_database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(replica_database_url)
    async with changes_stack(replica_database_url) as stack:
        response = await stack.http.get(
            url_of(chat_id), headers={"Authorization": f"Bearer {token_for(user_id)}"}
        )
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "change_feed_unavailable"
    assert "ALTER SYSTEM SET wal_level = logical" in error["message"]
    assert "restart" in error["message"]


async def test_a_bad_token_is_refused(logical_database_url: str) -> None:
    _, chat_id = await create_user_with_chat(logical_database_url)
    async with changes_stack(logical_database_url) as stack:
        response = await stack.http.get(
            url_of(chat_id), headers={"Authorization": "Bearer not-a-token"}
        )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
