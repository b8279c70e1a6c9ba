"""The development change feed: logical decoding of `supabase_realtime`, filtered by RLS."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from devkit.change_feed import (
    ChangeFeed,
    ChangeFeedLost,
    ChangeFeedUnavailable,
    SubscriberOverflow,
    Subscription,
)
from devkit.change_payloads import PostgresChange
from infra.db import create_pool
from infra.store.access import Claims
from infra.store.chats import ChatNotFound
from infra.store.ids import ChatId
from tests.support import create_user_with_chat, execute, fetch, insert_message, write_draft

# Past the interpreter's recursion limit (1000): json.loads raises RecursionError.
DEEP_JSON = 5000
SLOTS_SQL = (
    "select slot_name, temporary from pg_replication_slots where database = current_database()"
)


def claims_of(user_id: uuid.UUID) -> Claims:
    return {"sub": str(user_id), "role": "authenticated", "aud": "authenticated"}


@asynccontextmanager
async def change_feed(database_url: str, **options: Any) -> AsyncIterator[ChangeFeed]:
    pool = create_pool(database_url, max_size=4)
    await pool.open()
    feed = ChangeFeed(database_url, pool, **options)
    try:
        yield feed
    finally:
        await feed.close()
        await pool.close()


async def receive(subscription: Subscription, count: int) -> list[PostgresChange]:
    """The next `count` changes (within 20 s)."""
    received: list[PostgresChange] = []
    async with asyncio.timeout(20):
        while len(received) < count:
            received.extend(await subscription.next())
    return received


async def test_inserts_and_updates_arrive_as_realtime_payloads(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    # GIVEN a subscription to the user's chat
    async with (
        change_feed(url) as feed,
        await feed.subscribe(claims_of(user_id), ChatId(chat_id)) as subscription,
    ):
        # WHEN a reply is inserted, its draft written twice, and the reply completed
        message_id = await insert_message(url, chat_id, "", model="scripted", round=1)
        await write_draft(url, message_id, chat_id, "Hel", 1)
        await write_draft(url, message_id, chat_id, "Hello", 2)
        await execute(
            url,
            "update public.message set content = 'Hello', status = 'completed' where id = %s",
            message_id,
        )
        changes = await receive(subscription, 4)

    # THEN each arrives, in order, shaped as supabase-js receives it
    assert [(c["table"], c["eventType"]) for c in changes] == [
        ("message", "INSERT"),
        ("message_draft", "INSERT"),
        ("message_draft", "UPDATE"),
        ("message", "UPDATE"),
    ]
    inserted, _, draft, completed = changes
    assert set(inserted) == {
        "schema", "table", "commit_timestamp", "eventType", "new", "old", "errors"
    }  # fmt: skip
    assert inserted["schema"] == "public"
    assert inserted["errors"] is None
    assert inserted["old"] == {}
    assert inserted["commit_timestamp"].endswith("Z")
    # AND the values are typed: metadata an object, seq an integer, the rest as Postgres text
    assert inserted["new"]["metadata"] == {"model": "scripted", "round": 1}
    assert inserted["new"]["id"] == str(message_id)
    assert inserted["new"]["chat_id"] == str(chat_id)
    assert draft["new"]["seq"] == 2
    assert draft["new"]["draft_content"] == "Hello"
    assert completed["new"]["status"] == "completed"
    assert completed["new"]["content"] == "Hello"
    [row] = await fetch(
        url, "select created_at::text from public.message where id = %s", message_id
    )
    assert completed["new"]["created_at"] == row["created_at"]


async def test_a_large_value_left_out_of_an_update_is_filled_in(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    # Random hex does not compress: stored out of line (TOAST), so an update that leaves it
    # alone does not send it.
    content = secrets.token_hex(8000)
    message_id = await insert_message(url, chat_id, content)
    async with (
        change_feed(url) as feed,
        await feed.subscribe(claims_of(user_id), ChatId(chat_id)) as subscription,
    ):
        await execute(
            url, "update public.message set status = 'completed' where id = %s", message_id
        )
        [change] = await receive(subscription, 1)
    assert change["new"]["status"] == "completed"
    assert change["new"]["content"] == content


async def test_a_user_never_receives_rows_of_a_chat_that_is_not_theirs(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    alice, alices_chat = await create_user_with_chat(url)
    bob, bobs_chat = await create_user_with_chat(url)
    async with change_feed(url) as feed:
        # GIVEN each user subscribed to their own chat
        bobs = await feed.subscribe(claims_of(bob), ChatId(bobs_chat))
        alices = await feed.subscribe(claims_of(alice), ChatId(alices_chat))
        # WHEN both chats change
        await insert_message(url, bobs_chat, "for bob")
        await insert_message(url, alices_chat, "for alice")
        # THEN each sees their own chat's change only
        assert [c["new"]["content"] for c in await receive(bobs, 1)] == ["for bob"]
        assert [c["new"]["content"] for c in await receive(alices, 1)] == ["for alice"]
        # AND nobody subscribes to a chat they do not see
        with pytest.raises(ChatNotFound):
            await feed.subscribe(claims_of(alice), ChatId(bobs_chat))
        await bobs.close()
        await alices.close()


async def test_rows_are_checked_against_rls_as_they_are_delivered(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    alice, chat_id = await create_user_with_chat(url)
    bob, _ = await create_user_with_chat(url)
    async with change_feed(url) as feed:
        # GIVEN Alice subscribed to her chat
        alices = await feed.subscribe(claims_of(alice), ChatId(chat_id))
        # WHEN the chat becomes Bob's, and he subscribes, and a message comes
        await execute(url, "update public.chat set user_id = %s where id = %s", bob, chat_id)
        bobs = await feed.subscribe(claims_of(bob), ChatId(chat_id))
        await insert_message(url, chat_id, "for bob")
        # THEN Bob gets it
        assert [c["new"]["content"] for c in await receive(bobs, 1)] == ["for bob"]
        # AND Alice, handed the same change in the same batch as Bob, has it dropped by her
        # RLS check
        assert await alices.next(max_wait_s=0) == []
        await bobs.close()
        await alices.close()


async def test_changes_of_another_chat_of_the_same_user_are_not_delivered(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    other_chat = uuid.uuid4()
    await execute(url, "insert into public.chat (id, user_id) values (%s, %s)", other_chat, user_id)
    async with (
        change_feed(url) as feed,
        await feed.subscribe(claims_of(user_id), ChatId(chat_id)) as subscription,
    ):
        # WHEN the other chat changes, then this one
        await insert_message(url, other_chat, "elsewhere")
        await insert_message(url, chat_id, "here")
        # THEN the first change delivered is this chat's (changes arrive in commit order)
        [change] = await receive(subscription, 1)
    assert change["new"]["content"] == "here"


async def test_deletes_are_not_delivered(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    message_id = await insert_message(url, chat_id)
    await write_draft(url, message_id, chat_id, "draft", 1)
    async with (
        change_feed(url) as feed,
        await feed.subscribe(claims_of(user_id), ChatId(chat_id)) as subscription,
    ):
        await execute(url, "delete from public.message_draft where message_id = %s", message_id)
        await execute(url, "update public.message set content = 'x' where id = %s", message_id)
        [change] = await receive(subscription, 1)
    assert (change["table"], change["eventType"]) == ("message", "UPDATE")


async def test_a_subscriber_joining_a_running_feed_misses_nothing_after_it_is_ready(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with change_feed(url) as feed:
        first = await feed.subscribe(claims_of(user_id), ChatId(chat_id))
        await insert_message(url, chat_id, "before")
        await receive(first, 1)
        # GIVEN a second subscriber, ready once subscribe returns
        second = await feed.subscribe(claims_of(user_id), ChatId(chat_id))
        # WHEN a change commits right after
        await insert_message(url, chat_id, "after")
        # THEN it reaches the new subscriber (the one before, delivered earlier, does not)
        assert [c["new"]["content"] for c in await receive(second, 1)] == ["after"]
        await first.close()
        await second.close()


async def test_many_quick_updates_arrive_all_and_in_order(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    message_id = await insert_message(url, chat_id)
    async with (
        change_feed(url) as feed,
        await feed.subscribe(claims_of(user_id), ChatId(chat_id)) as subscription,
    ):
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            for seq in range(1, 201):
                await conn.execute(
                    "insert into public.message_draft (message_id, chat_id, draft_content,"
                    " seq) values (%s, %s, %s, %s) on conflict (message_id) do update"
                    " set draft_content = excluded.draft_content, seq = excluded.seq",
                    (message_id, chat_id, "x" * seq, seq),
                )
        changes = await receive(subscription, 200)
    assert [c["new"]["seq"] for c in changes] == list(range(1, 201))


async def test_a_subscriber_that_falls_behind_is_dropped_without_stalling_others(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    message_id = await insert_message(url, chat_id)
    async with change_feed(url) as feed:
        # GIVEN a subscriber that never reads, and one that does
        slow = await feed.subscribe(claims_of(user_id), ChatId(chat_id), max_pending=5)
        fast = await feed.subscribe(claims_of(user_id), ChatId(chat_id))
        # WHEN more changes come than the slow one may have waiting
        for seq in range(1, 21):
            await write_draft(url, message_id, chat_id, f"v{seq}", seq)
        # THEN the reading subscriber gets every one
        changes = await receive(fast, 20)
        assert [c["new"]["seq"] for c in changes] == list(range(1, 21))
        # AND the slow one learns it was dropped
        with pytest.raises(SubscriberOverflow):
            await slow.next(max_wait_s=0)
        await slow.close()
        await fast.close()


async def test_the_slot_is_released_when_the_last_subscriber_leaves(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with change_feed(url) as feed:
        first = await feed.subscribe(claims_of(user_id), ChatId(chat_id))
        second = await feed.subscribe(claims_of(user_id), ChatId(chat_id))
        # One temporary slot for the whole process, however many subscribers
        assert await fetch(url, SLOTS_SQL) == [{"slot_name": feed.slot, "temporary": True}]
        await first.close()
        assert len(await fetch(url, SLOTS_SQL)) == 1
        await second.close()
        assert await fetch(url, SLOTS_SQL) == []
        # AND a new subscriber starts it again
        async with await feed.subscribe(claims_of(user_id), ChatId(chat_id)):
            assert len(await fetch(url, SLOTS_SQL)) == 1
        # AND closing the feed releases it too
        await feed.subscribe(claims_of(user_id), ChatId(chat_id))
        await feed.close()
        assert await fetch(url, SLOTS_SQL) == []


async def test_a_lost_decoder_fails_its_subscribers_and_the_next_one_starts_afresh(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with change_feed(url) as feed:
        subscription = await feed.subscribe(claims_of(user_id), ChatId(chat_id))
        # WHEN the decoder's connection dies
        await fetch(
            url,
            "select pg_terminate_backend(active_pid) from pg_replication_slots"
            " where slot_name = %s",
            feed.slot,
        )
        # THEN its subscriber is told it may have missed changes
        with pytest.raises(ChangeFeedLost):
            async with asyncio.timeout(20):
                await subscription.next()
        # AND a new subscriber gets a working feed
        async with await feed.subscribe(claims_of(user_id), ChatId(chat_id)) as again:
            await insert_message(url, chat_id, "still here")
            [change] = await receive(again, 1)
        await subscription.close()
    assert change["new"]["content"] == "still here"


async def test_a_json_value_nested_too_deep_to_decode_drops_its_row_not_the_feed(
    logical_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    message_id = await insert_message(url, chat_id, "deep")
    async with (
        change_feed(url) as feed,
        await feed.subscribe(claims_of(user_id), ChatId(chat_id)) as subscription,
    ):
        # WHEN a row gets jsonb nested deeper than Python's json can read (Postgres stores it)
        deep = "[" * DEEP_JSON + "]" * DEEP_JSON
        await execute(
            url, "update public.message set metadata = %s::jsonb where id = %s", deep, message_id
        )
        # AND another row changes after it
        await insert_message(url, chat_id, "after")
        [change] = await receive(subscription, 1)
    # THEN the subscriber still receives what follows, and the log says which row was dropped
    assert change["new"]["content"] == "after"
    assert "row change dropped" in caplog.text


async def test_a_server_without_logical_decoding_is_refused_with_the_fix(
    replica_database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(replica_database_url)
    async with change_feed(replica_database_url) as feed:
        with pytest.raises(ChangeFeedUnavailable, match="ALTER SYSTEM SET wal_level = logical"):
            await feed.subscribe(claims_of(user_id), ChatId(chat_id))
        assert feed.slot is None
