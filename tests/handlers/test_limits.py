"""Per-user limits: active turns, turns per minute, chats per minute, daily tokens.

Past a limit the answer is 429 with a Retry-After and the JSON error body, and nothing is
stored. The limits are counted in Postgres under a per-user lock, so requests sent together
cannot overshoot them, and other users never feel them.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from tests.api import ok
from tests.security.server_log import describe, logged_exceptions
from tests.support import (
    create_user_with_chat,
    execute,
    fetch,
    in_process_app,
    running_stack,
    token_for,
    wait_for_row,
)

# A turn that stays active until it is answered or canceled: its tool waits for approval.
EMAIL = '/send_email {"to": "ada@example.com", "subject": "Minutes"}'
AWAITING_SQL = "select 1 from message where chat_id = %s and status = 'awaiting_approval'"
# Generous limits, so that a test meets only the one it is about.
ROOMY: dict[str, Any] = {
    "max_active_turns_per_user": 100,
    "max_turns_per_minute": 100,
    "max_chats_per_minute": 100,
}


async def add_chat(database_url: str, user_id: uuid.UUID) -> uuid.UUID:
    chat_id = uuid.uuid4()
    await execute(
        database_url,
        "insert into public.chat (id, user_id, title) values (%s, %s, 'more')",
        chat_id,
        user_id,
    )
    return chat_id


def message(chat_id: uuid.UUID, content: str, **extra: Any) -> dict[str, Any]:
    return {"chatId": str(chat_id), "content": content, **extra}


# Time passes for the limits: the user's oldest counted turn or chat becomes %s seconds old.
AGE_SQL = {
    column: f"""
update handoff.user_limits set {column} = array(
  select case when t = (select min(u) from unnest({column}) u)
              then now() - make_interval(secs => %s) else t end
  from unnest({column}) t)
where user_id = %s
"""  # noqa: S608 (the column is one of two names)
    for column in ("turns", "chats")
}


async def age(database_url: str, user_id: uuid.UUID, counted: str, *, oldest_by: float) -> None:
    await execute(database_url, AGE_SQL[counted], oldest_by, user_id)


async def stored(database_url: str) -> dict[str, int]:
    [row] = await fetch(
        database_url,
        "select (select count(*) from message) as messages,"
        " (select count(*) from job_runs) as jobs, (select count(*) from chat) as chats",
    )
    return dict(row)


def assert_limited(response: httpx.Response, code: str) -> int:
    """The 429 of a limit; its Retry-After in seconds."""
    body = ok(response, 429)
    assert response.headers["content-type"] == "application/json"
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    retry_after = int(response.headers["retry-after"])
    assert retry_after >= 1
    return retry_after


async def test_active_turns_past_the_limit_get_429_until_one_ends(database_url: str) -> None:
    user_id, first = await create_user_with_chat(database_url)
    second, third = await add_chat(database_url, user_id), await add_chat(database_url, user_id)
    other_user, other_chat = await create_user_with_chat(database_url)
    token = token_for(user_id)
    settings = {**ROOMY, "max_active_turns_per_user": 2}
    async with running_stack(database_url, **settings) as stack:
        # GIVEN two turns of the user that have not ended: one waits for an approval in the
        # background, one is enqueued behind it
        events = await stack.respond(token, message(first, EMAIL))
        assert events[-1][0] == "handoff"
        await wait_for_row(database_url, AWAITING_SQL, first)
        events = await stack.respond(token, message(first, "and then", multitaskStrategy="enqueue"))
        assert events[-1][1]["status"] == "queued"
        before = await stored(database_url)

        # WHEN the user starts a third turn, in another chat
        with logged_exceptions() as exceptions:
            response = await stack.respond_response(token, message(second, "hello"))

        # THEN it is refused with a Retry-After, and nothing of it is stored
        assert assert_limited(response, "too_many_active_turns") == 5
        assert exceptions == [], describe(exceptions)
        assert await stored(database_url) == before
        # AND another user is not held back by it
        events = await stack.respond(token_for(other_user), message(other_chat, "hello"))
        assert events[-1][0] == "done"

        # WHEN a message interrupts the job that waits: it takes that job's place, so it passes
        events = await stack.respond(
            token, message(first, "never mind", multitaskStrategy="interrupt")
        )
        assert events[-1][0] == "done"
        # (the enqueued turn now runs in the background, and ends)
        await stack.executor.wait_idle()

        # THEN, with the user's turns ended, new ones pass again
        for chat in (second, third):
            events = await stack.respond(token, message(chat, "hello again"))
            assert events[-1][0] == "done"


async def test_a_canceled_turn_no_longer_counts(database_url: str) -> None:
    user_id, first = await create_user_with_chat(database_url)
    second = await add_chat(database_url, user_id)
    token = token_for(user_id)
    async with running_stack(database_url, **{**ROOMY, "max_active_turns_per_user": 1}) as stack:
        await stack.respond(token, message(first, EMAIL))
        await wait_for_row(database_url, AWAITING_SQL, first)
        response = await stack.respond_response(token, message(second, "hello"))
        assert_limited(response, "too_many_active_turns")
        assert ok(await stack.cancel(token, first), 202)["canceled"] is True
        events = await stack.respond(token, message(second, "hello"))
        assert events[-1][0] == "done"
        await stack.executor.wait_idle()


async def test_turns_sent_together_cannot_overshoot_the_active_limit(database_url: str) -> None:
    user_id, first = await create_user_with_chat(database_url)
    chats = [first] + [await add_chat(database_url, user_id) for _ in range(5)]
    token = token_for(user_id)
    limit = 3
    async with running_stack(
        database_url, **{**ROOMY, "max_active_turns_per_user": limit}
    ) as stack:
        # WHEN twice the limit of turns that stay active are sent at once, one per chat
        replies = await asyncio.gather(
            *(stack.respond_response(token, message(chat, EMAIL)) for chat in chats)
        )
        statuses = sorted(r.status_code for r in replies)
        # THEN exactly the limit pass
        assert statuses == [200] * limit + [429] * limit
        for reply in replies:
            if reply.status_code == 429:
                assert_limited(reply, "too_many_active_turns")
        assert len(await fetch(database_url, "select 1 from message where role = 'user'")) == limit
        assert len(await fetch(database_url, "select 1 from job_runs")) == limit
        for chat, reply in zip(chats, replies, strict=True):
            if reply.status_code == 200:
                await wait_for_row(database_url, AWAITING_SQL, chat)
                assert ok(await stack.cancel(token, chat), 202)["canceled"] is True
        await stack.executor.wait_idle()


async def test_turns_per_minute_past_the_limit_get_429_until_the_oldest_leaves_the_window(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    other_user, other_chat = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url, **{**ROOMY, "max_turns_per_minute": 3}) as stack:
        # GIVEN three turns in the last minute
        for n in range(3):
            events = await stack.respond(token, message(chat_id, f"message {n}"))
            assert events[-1][0] == "done"
        before = await stored(database_url)

        # WHEN the user sends a fourth
        response = await stack.respond_response(token, message(chat_id, "one more"))

        # THEN it is refused until the first leaves the minute, and nothing is stored
        retry_after = assert_limited(response, "too_many_turns")
        assert 55 <= retry_after <= 60
        assert f"Try again in {retry_after} seconds." in response.json()["error"]["message"]
        assert await stored(database_url) == before
        # AND another user is not held back by it
        events = await stack.respond(token_for(other_user), message(other_chat, "hello"))
        assert events[-1][0] == "done"

        # WHEN the first turn is 50 s old, the wait left is about 10 s
        await age(database_url, user_id, "turns", oldest_by=50)
        response = await stack.respond_response(token, message(chat_id, "one more"))
        assert 9 <= assert_limited(response, "too_many_turns") <= 11
        # AND once it is older than a minute, one more turn fits, and only one
        await age(database_url, user_id, "turns", oldest_by=61)
        events = await stack.respond(token, message(chat_id, "one more"))
        assert events[-1][0] == "done"
        response = await stack.respond_response(token, message(chat_id, "and another"))
        assert_limited(response, "too_many_turns")
        # AND deleting their messages (which the Data API lets a user do) makes no room
        await execute(database_url, "delete from message where chat_id = %s", chat_id)
        response = await stack.respond_response(token, message(chat_id, "and another"))
        assert_limited(response, "too_many_turns")


async def test_turns_sent_together_cannot_overshoot_the_per_minute_limit(
    database_url: str,
) -> None:
    user_id, first = await create_user_with_chat(database_url)
    chats = [first] + [await add_chat(database_url, user_id) for _ in range(7)]
    token = token_for(user_id)
    limit = 4
    async with in_process_app(database_url, **{**ROOMY, "max_turns_per_minute": limit}) as stack:
        replies = await asyncio.gather(
            *(stack.respond_response(token, message(chat, "hello")) for chat in chats)
        )
    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200] * limit + [429] * limit
    for reply in replies:
        if reply.status_code == 429:
            assert_limited(reply, "too_many_turns")
    assert len(await fetch(database_url, "select 1 from message where role = 'user'")) == limit
    assert len(await fetch(database_url, "select 1 from job_runs")) == limit


async def test_chats_per_minute_past_the_limit_get_429_and_create_nothing(
    database_url: str,
) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    other_user, _ = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url, **{**ROOMY, "max_chats_per_minute": 2}) as stack:
        # GIVEN two chats created in the last minute
        for _ in range(2):
            assert (await stack.create_chat(token, title="t")).status_code == 201
        before = await stored(database_url)

        # WHEN the user creates one more
        response = await stack.create_chat(token, title="t")

        # THEN it is refused, and no chat is created
        retry_after = assert_limited(response, "too_many_chats")
        assert 55 <= retry_after <= 60
        assert await stored(database_url) == before
        # AND another user is not held back by it
        assert (await stack.create_chat(token_for(other_user), title="t")).status_code == 201

        # WHEN the first is more than a minute old, one more chat can be created
        await age(database_url, user_id, "chats", oldest_by=61)
        assert (await stack.create_chat(token, title="t")).status_code == 201
        response = await stack.create_chat(token, title="t")
        assert_limited(response, "too_many_chats")


async def test_chats_created_together_cannot_overshoot_the_limit(database_url: str) -> None:
    user_id = uuid.uuid4()
    await execute(database_url, "insert into auth.users (id) values (%s)", user_id)
    token = token_for(user_id)
    limit = 4
    async with in_process_app(database_url, **{**ROOMY, "max_chats_per_minute": limit}) as stack:
        responses = await asyncio.gather(
            *(stack.create_chat(token, title="t") for _ in range(2 * limit))
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] * limit + [429] * limit
    assert len(await fetch(database_url, "select 1 from chat")) == limit


# The user's tokens of today (UTC), as the budget counts them, and the seconds to midnight UTC.
TODAY_SQL = """
select coalesce(sum(input_tokens + output_tokens), 0)::int as tokens,
       extract(epoch from date_trunc('day', now() at time zone 'UTC') + interval '1 day'
                          - (now() at time zone 'UTC'))::float8 as to_midnight
from reply_usage
where user_id = %s and created_at >= date_trunc('day', now() at time zone 'UTC') at time zone 'UTC'
"""
LIMIT_TIMES_SQL = "select turns from handoff.user_limits where user_id = %s"


async def test_the_daily_token_budget_refuses_new_turns_until_midnight_utc(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    second_chat = await add_chat(database_url, user_id)
    other_user, other_chat = await create_user_with_chat(database_url)
    token = token_for(user_id)
    budget = 60
    async with running_stack(database_url, **{**ROOMY, "max_user_daily_tokens": budget}) as stack:
        # GIVEN turns, quick and handed off, while the user's tokens of today are below the budget
        sent = 0
        while (await fetch(database_url, TODAY_SQL, user_id))[0]["tokens"] < budget:
            content = "/calc 6*7" if sent % 2 else f"hello number {sent}"
            events = await stack.respond(token, message(chat_id, content))
            assert events[-1][0] == ("handoff" if sent % 2 else "done")
            await stack.executor.wait_idle()
            sent += 1
            assert sent < 20
        [today] = await fetch(database_url, TODAY_SQL, user_id)
        before = await stored(database_url)
        times = await fetch(database_url, LIMIT_TIMES_SQL, user_id)

        # WHEN they have reached it and start another turn, in any of their chats
        with logged_exceptions() as exceptions:
            response = await stack.respond_response(token, message(second_chat, "one more"))

        # THEN it is refused until midnight UTC, in plain words, and nothing of it is stored
        retry_after = assert_limited(response, "token_budget_spent")
        assert abs(retry_after - today["to_midnight"]) <= 3
        assert response.json()["error"]["message"].startswith(
            "You have used today's token budget. It renews at midnight UTC, in "
        )
        assert exceptions == [], describe(exceptions)
        assert await stored(database_url) == before
        assert await fetch(database_url, LIMIT_TIMES_SQL, user_id) == times
        # AND their usage says so
        daily = (await stack.usage(token))["dailyBudget"]
        assert (daily["tokens"], daily["used"]) == (budget, today["tokens"])
        assert daily["renewsAt"].endswith("T00:00:00Z")
        # AND another user is not held back by it
        events = await stack.respond(token_for(other_user), message(other_chat, "hello"))
        assert events[-1][0] == "done"
        # AND deleting their messages and chats (which the Data API lets a user do) makes no room
        await execute(database_url, "delete from chat where user_id = %s", user_id)
        chat_id = await add_chat(database_url, user_id)
        response = await stack.respond_response(token, message(chat_id, "and now?"))
        assert_limited(response, "token_budget_spent")

        # WHEN the day is over: the user's turns so far were yesterday's
        await execute(
            database_url,
            "update reply_usage set created_at = created_at - interval '1 day' where user_id = %s",
            user_id,
        )
        # THEN new turns pass again
        events = await stack.respond(token, message(chat_id, "good morning"))
        assert events[-1][0] == "done"


async def test_without_a_daily_token_budget_turns_are_not_counted_against_one(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url, **ROOMY) as stack:
        for n in range(3):
            events = await stack.respond(token, message(chat_id, "hello " * 200 + str(n)))
            assert events[-1][0] == "done"
        usage = await stack.usage(token)
    assert usage["dailyBudget"] is None


async def test_a_token_whose_user_does_not_exist_counts_nothing(database_url: str) -> None:
    _, chat_id = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        response = await stack.respond_response(token_for(uuid.uuid4()), message(chat_id, "hello"))
    assert ok(response, 401)["error"]["code"] == "unauthorized"
    assert await fetch(database_url, "select * from handoff.user_limits") == []
    assert await fetch(database_url, "select * from message") == []


async def test_the_limits_are_documented_where_they_apply(database_url: str) -> None:
    async with in_process_app(database_url) as stack:
        paths = stack.app.openapi()["paths"]
    for path, method in (("/api/chat/respond", "post"), ("/api/chats", "post")):
        limited = paths[path][method]["responses"]["429"]
        assert "Retry-After" in limited["headers"]
        assert limited["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorBody"
        }
    assert "429" not in paths["/api/chats"]["get"]["responses"]
