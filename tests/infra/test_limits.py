"""`limits.admit` against the database, without the app: the window, the refusal and its
Retry-After, the lock that keeps two requests sent together from sharing the last place.
tests/handlers/test_limits.py tells the same story through the API."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from infra.db import Conn, connect
from infra.store.chats import UnknownUser
from infra.store.ids import UserId
from infra.store.limits import WINDOW_S, Counted, TooManyChats, TooManyTurns, admit
from tests.support import create_user_with_chat, execute, fetch

TIMES_SQL = "select turns, chats from handoff.user_limits where user_id = %s"
# Time passes: every time the user has of `counted` becomes `secs` older.
AGE_SQL = {
    counted: f"update handoff.user_limits set {counted} = array("  # noqa: S608 (a column name)
    f" select t - make_interval(secs => %s) from unnest({counted}) t) where user_id = %s"
    for counted in ("turns", "chats")
}


async def admitted(conn: Conn, user_id: UserId, counted: Counted, limit: int) -> None:
    """One admit in a transaction of its own, committed when it passes."""
    async with conn.transaction():
        await admit(conn, user_id, counted, limit=limit)


async def admitted_then_failed(conn: Conn, user_id: UserId) -> None:
    async with conn.transaction():
        await admit(conn, user_id, "turns", limit=1)
        raise RuntimeError("the message was not stored")


async def test_the_window_holds_the_limit_and_frees_a_place_as_the_oldest_leaves(
    database_url: str,
) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with await connect(database_url) as conn:
        # GIVEN two turns admitted under a limit of two
        for _ in range(2):
            await admitted(conn, UserId(user_id), "turns", limit=2)
        # WHEN a third comes within the minute
        with pytest.raises(TooManyTurns) as refused:
            await admitted(conn, UserId(user_id), "turns", limit=2)
        # THEN it is refused until the oldest leaves the window, and its time is not kept
        assert WINDOW_S - 5 <= refused.value.retry_after_s <= WINDOW_S
        [row] = await fetch(database_url, TIMES_SQL, user_id)
        assert (len(row["turns"]), row["chats"]) == (2, [])
        # AND chats are counted apart from turns
        await admitted(conn, UserId(user_id), "chats", limit=2)
        # WHEN the two turns are 50 s old, the wait left is what remains of their minute
        await execute(database_url, AGE_SQL["turns"], 50, user_id)
        with pytest.raises(TooManyTurns) as refused:
            await admitted(conn, UserId(user_id), "turns", limit=2)
        assert 9 <= refused.value.retry_after_s <= 11
        # AND once they are older than the window, there is room again
        await execute(database_url, AGE_SQL["turns"], 11, user_id)
        await admitted(conn, UserId(user_id), "turns", limit=2)
        await admitted(conn, UserId(user_id), "turns", limit=2)
    # Only the times within the window are kept.
    [row] = await fetch(database_url, TIMES_SQL, user_id)
    assert (len(row["turns"]), len(row["chats"])) == (2, 1)


async def test_two_requests_together_cannot_both_take_the_last_place(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with await connect(database_url) as first, await connect(database_url) as second:
        # GIVEN a request that took the last chat of the minute, its transaction still open
        async with first.transaction():
            await admit(first, UserId(user_id), "chats", limit=1)
            # WHEN another request of the user's counts meanwhile
            racing = asyncio.create_task(admitted(second, UserId(user_id), "chats", limit=1))
            await asyncio.sleep(0.3)
            # THEN it waits on the user's row rather than reading the count before the first
            assert not racing.done()
        # AND once the first commits, it sees that chat and is refused
        with pytest.raises(TooManyChats):
            await racing
    [row] = await fetch(database_url, TIMES_SQL, user_id)
    assert len(row["chats"]) == 1


async def test_a_request_that_rolls_back_leaves_its_place_free(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with await connect(database_url) as conn:
        # GIVEN a turn admitted in a transaction that then fails (its message was not stored)
        with pytest.raises(RuntimeError):
            await admitted_then_failed(conn, UserId(user_id))
        # THEN the one place of the minute is still there
        await admitted(conn, UserId(user_id), "turns", limit=1)


async def test_a_user_the_database_does_not_know_is_refused_as_unknown(database_url: str) -> None:
    async with await connect(database_url) as conn:
        with pytest.raises(UnknownUser):
            await admitted(conn, UserId(uuid.uuid4()), "turns", limit=5)
    assert await fetch(database_url, "select * from handoff.user_limits") == []
