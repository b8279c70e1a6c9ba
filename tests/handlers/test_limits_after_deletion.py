"""Deleting frees nothing it should not: a turn whose reply or chat the user deletes while it
streams still counts against the active-turn limit until it stops, and what its model used
counts against the daily token budget, as `/api/usage` shows."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg

from tests.handlers.test_limits import ROOMY, add_chat, assert_limited, message
from tests.support import create_user_with_chat, fetch, running_stack, token_for

# A message whose scripted answer streams for a few seconds (it echoes the words, one per 50 ms).
LONG = " ".join(f"word{n}" for n in range(80))
STREAMING_SQL = """
select m.id from message m join chat c on c.id = m.chat_id
where c.user_id = %s and m.role = 'assistant' and m.status = 'streaming'
"""


async def delete_as_owner(database_url: str, user_id: uuid.UUID, query: str, *params: Any) -> None:
    """A delete through the Data API: the owner's role, under RLS."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        claims = f'{{"sub": "{user_id}", "role": "authenticated"}}'
        await conn.execute("select set_config('request.jwt.claims', %s, true)", (claims,))
        await conn.execute("set local role authenticated")
        assert (await conn.execute(query, params)).rowcount == 1
        await conn.commit()


async def streaming_replies(database_url: str, user_id: uuid.UUID, count: int) -> list[uuid.UUID]:
    for _ in range(200):
        rows = await fetch(database_url, STREAMING_SQL, user_id)
        if len(rows) >= count:
            return [r["id"] for r in rows]
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} replies streaming")


async def test_deleting_running_replies_and_chats_makes_no_room(database_url: str) -> None:
    user_id, first = await create_user_with_chat(database_url)
    chats = [first, *[await add_chat(database_url, user_id) for _ in range(4)]]
    spare = [await add_chat(database_url, user_id) for _ in range(2)]
    token = token_for(user_id)
    settings = {**ROOMY, "max_active_turns_per_user": 5, "scripted_token_delay_ms": 50}
    async with running_stack(database_url, **settings) as stack:
        # GIVEN five turns streaming: the user's limit
        turns = [asyncio.create_task(stack.respond(token, message(c, LONG))) for c in chats]
        replies = await streaming_replies(database_url, user_id, 5)

        # WHEN the user deletes one running reply and one running chat, through the Data API
        await asyncio.sleep(1.5)
        await delete_as_owner(
            database_url, user_id, "delete from message where id = %s", replies[0]
        )
        await delete_as_owner(database_url, user_id, "delete from chat where id = %s", chats[4])

        # THEN a sixth and a seventh turn are refused all the same
        for chat in spare:
            assert_limited(
                await stack.respond_response(token, message(chat, "hello")),
                "too_many_active_turns",
            )
        await asyncio.gather(*turns)

        # AND what the deleted turns streamed is recorded, and the user's usage shows it
        used = await fetch(
            database_url, "select output_tokens from reply_usage where user_id = %s", user_id
        )
        assert len(used) == 5
        assert all(u["output_tokens"] >= 80 for u in used)
        usage = await stack.usage(token)
        assert usage["total"]["outputTokens"] == sum(u["output_tokens"] for u in used)

        # AND once they stopped, new turns pass
        events = await stack.respond(token, message(spare[0], "hello"))
        assert events[-1][0] == "done"


async def test_replies_deleted_mid_stream_spend_the_daily_budget(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    settings = {**ROOMY, "max_user_daily_tokens": 300, "scripted_token_delay_ms": 20}
    async with running_stack(database_url, **settings) as stack:
        # GIVEN turns whose replies the user deletes 1.5 s into their stream, again and again
        deleted = 0
        for _ in range(10):
            turn = asyncio.create_task(stack.respond_response(token, message(chat_id, LONG)))
            streaming: list[dict[str, Any]] = []
            while not turn.done() and not streaming:
                streaming = await fetch(database_url, STREAMING_SQL, user_id)
                await asyncio.sleep(0.05)
            if streaming:
                await asyncio.sleep(1.5)
                await delete_as_owner(
                    database_url, user_id, "delete from message where id = %s", streaming[0]["id"]
                )
                deleted += 1
            if (await turn).status_code == 429:
                break
        else:
            raise AssertionError("ten turns deleted mid-stream, and the budget never refused one")

        # THEN the budget refused the turn after it was spent, and the usage says what was spent
        assert_limited(await turn, "token_budget_spent")
        daily = (await stack.usage(token))["dailyBudget"]
        assert daily["used"] >= 300
        assert 2 <= deleted <= 4
