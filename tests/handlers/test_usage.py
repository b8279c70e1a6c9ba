"""GET /api/usage: what a user's replies used, per model and per chat, under their RLS.

Turns run through the real app: the scripted model and, for a second model, the real OpenAI
package against the local fake provider, whose usage is scripted. The figures are checked
against what the replies themselves record (`metadata.usage`, `metadata.snapshot.progress`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tests.fake_providers import Reply, serve_fake_providers
from tests.fake_providers.script import ToolCall, Usage
from tests.support import (
    Api,
    Stack,
    create_user_with_chat,
    execute,
    fetch,
    in_process_app,
    running_stack,
    token_for,
    wait_for_row,
)

GPT = "openai:gpt-4o-mini"
PRICES = {GPT: {"input": 0.15, "output": 0.60}, "scripted": {"input": 1.0, "output": 2.0}}
FIGURES = {"turns", "inputTokens", "outputTokens", "toolCalls", "estimatedCostUsd"}


@asynccontextmanager
async def openai_stack(database_url: str, **overrides: Any) -> AsyncIterator[tuple[Stack, Any]]:
    """The stack on GPT, served by the fake provider."""
    async with (
        serve_fake_providers() as fake,
        running_stack(
            database_url,
            model=GPT,
            openai_base_url=fake.openai_base_url,
            openai_api_key="test-key",
            **overrides,
        ) as stack,
    ):
        yield stack, fake


async def add_chat(database_url: str, user_id: uuid.UUID, title: str) -> uuid.UUID:
    chat_id = uuid.uuid4()
    await execute(
        database_url,
        "insert into public.chat (id, user_id, title) values (%s, %s, %s)",
        chat_id,
        user_id,
        title,
    )
    return chat_id


async def quick_turn(stack: Api, user_id: uuid.UUID, chat_id: uuid.UUID, content: str) -> str:
    """One turn that needs no background job; its last SSE event's name."""
    events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": content})
    return events[-1][0]


async def turn(stack: Stack, user_id: uuid.UUID, chat_id: uuid.UUID, content: str) -> str:
    """One turn, to its end (in the background too); its last SSE event's name."""
    events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": content})
    await stack.executor.wait_idle()
    return events[-1][0]


# What the replies record, summed per chat and model: the yardstick.
REPLIES_SQL = """
select m.chat_id, m.metadata ->> 'model' as model, count(*) as turns,
       sum((m.metadata -> 'usage' ->> 'input')::bigint) as input,
       sum((m.metadata -> 'usage' ->> 'output')::bigint) as output,
       sum((select count(*) from jsonb_array_elements(m.metadata -> 'snapshot' -> 'progress') p
            where p ->> 'status' <> 'pending')) as tools
from message m join chat c on c.id = m.chat_id
where m.role = 'assistant' and c.user_id = %s
group by m.chat_id, m.metadata ->> 'model'
"""


async def recorded(database_url: str, user_id: uuid.UUID) -> dict[tuple[str, str], dict[str, int]]:
    rows = await fetch(database_url, REPLIES_SQL, user_id)
    return {
        (str(r["chat_id"]), r["model"]): {
            "turns": int(r["turns"]),
            "inputTokens": int(r["input"]),
            "outputTokens": int(r["output"]),
            "toolCalls": int(r["tools"]),
        }
        for r in rows
    }


def without_cost(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in figures.items() if k != "estimatedCostUsd"}


def summed(figures: list[dict[str, int]]) -> dict[str, int]:
    keys = ("turns", "inputTokens", "outputTokens", "toolCalls")
    return {k: sum(f[k] for f in figures) for k in keys}


def cost(model: str, figures: dict[str, Any]) -> float:
    price = PRICES[model]
    tokens = (int(figures["inputTokens"]), int(figures["outputTokens"]))
    return round((tokens[0] * price["input"] + tokens[1] * price["output"]) / 1_000_000, 6)


async def test_usage_per_model_and_chat_after_turns_quick_and_handed_off(
    database_url: str,
) -> None:
    user_id, first = await create_user_with_chat(database_url)
    second = await add_chat(database_url, user_id, "second")
    # GIVEN turns on the scripted model: one answered at once, one that hands off a tool call,
    # one with two tool calls in one round
    async with running_stack(database_url) as stack:
        assert await turn(stack, user_id, first, "hello there") == "done"
        assert await turn(stack, user_id, first, "/calc 2*21") == "handoff"
        assert await turn(stack, user_id, second, "/calc 1+1\n/calc 2+2") == "handoff"
        # WHEN the user asks for their usage, without a price table
        report = await stack.usage(token_for(user_id))
    # THEN each figure is what the replies recorded, and no cost is guessed
    truth = await recorded(database_url, user_id)
    assert set(truth) == {(str(first), "scripted"), (str(second), "scripted")}
    assert truth[str(first), "scripted"]["turns"] == 2
    assert truth[str(first), "scripted"]["toolCalls"] == 1
    assert truth[str(second), "scripted"]["toolCalls"] == 2
    assert all(f["inputTokens"] > 0 and f["outputTokens"] > 0 for f in truth.values())
    assert set(report) == {"since", "until", "total", "models", "chats", "dailyBudget"}
    assert (report["since"], report["until"], report["dailyBudget"]) == (None, None, None)
    assert set(report["total"]) == FIGURES
    assert without_cost(report["total"]) == summed(list(truth.values()))
    assert report["total"]["estimatedCostUsd"] is None
    [scripted] = report["models"]
    assert scripted["model"] == "scripted"
    assert without_cost(scripted) == {"model": "scripted", **summed(list(truth.values()))}
    assert {c["chatId"]: c["title"] for c in report["chats"]} == {
        str(first): "test",
        str(second): "second",
    }
    for chat in report["chats"]:
        expected = truth[chat["chatId"], "scripted"]
        assert without_cost(chat["total"]) == expected
        assert [without_cost(m) for m in chat["models"]] == [{"model": "scripted", **expected}]
    # The chats come most tokens first.
    tokens = [c["total"]["inputTokens"] + c["total"]["outputTokens"] for c in report["chats"]]
    assert tokens == sorted(tokens, reverse=True)

    # GIVEN a turn on another model, which reports its own usage, and a price table
    async with openai_stack(database_url, model_prices=PRICES) as (stack, fake):
        fake.script(
            Reply(text=["Let me ", "check."], tool_calls=[ToolCall("calc", {"input": "6*7"})]),
            Reply(text=["It is 42."], usage=Usage(input_tokens=1200, output_tokens=30)),
        )
        assert await turn(stack, user_id, second, "What is 6*7?") == "handoff"
        # WHEN the user asks for their usage, and for one chat's
        report = await stack.usage(token_for(user_id))
        one_chat = await stack.usage(token_for(user_id), chatId=str(second))
    # THEN the figures are per model, and each model's cost is its tokens at its price
    truth = await recorded(database_url, user_id)
    gpt = truth[str(second), GPT]
    assert gpt["turns"] == 1
    assert gpt["toolCalls"] == 1
    assert gpt["inputTokens"] >= 1200  # the first round's, and the scripted 1,200 of the second
    by_model = {m["model"]: m for m in report["models"]}
    assert set(by_model) == {"scripted", GPT}
    assert without_cost(by_model[GPT]) == {"model": GPT, **gpt}
    assert by_model[GPT]["estimatedCostUsd"] == cost(GPT, gpt)
    assert by_model["scripted"]["estimatedCostUsd"] == cost("scripted", by_model["scripted"])
    assert report["total"]["estimatedCostUsd"] == round(
        by_model[GPT]["estimatedCostUsd"] + by_model["scripted"]["estimatedCostUsd"], 6
    )
    assert without_cost(report["total"]) == summed(list(truth.values()))
    # AND one chat's report holds that chat only, by model
    [chat] = one_chat["chats"]
    assert chat["chatId"] == str(second)
    assert {m["model"] for m in chat["models"]} == {"scripted", GPT}
    assert without_cost(one_chat["total"]) == summed(
        [truth[str(second), "scripted"], truth[str(second), GPT]]
    )

    # WHEN the price table names only one of the two models
    async with in_process_app(database_url, model_prices={GPT: PRICES[GPT]}) as stack:
        report = await stack.usage(token_for(user_id))
    # THEN the other has no cost, and neither has the total, as a part of it is unknown
    by_model = {m["model"]: m for m in report["models"]}
    assert by_model[GPT]["estimatedCostUsd"] == cost(GPT, gpt)
    assert by_model["scripted"]["estimatedCostUsd"] is None
    assert report["total"]["estimatedCostUsd"] is None


async def test_a_user_sees_only_their_own_usage_and_cannot_change_it(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    other_user, other_chat = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        # GIVEN turns of two users
        await turn(stack, user_id, chat_id, "hello")
        await turn(stack, other_user, other_chat, "a much longer message " * 20)
        await turn(stack, other_user, other_chat, "/calc 1+1")
        mine = await stack.usage(token_for(user_id))
        theirs = await stack.usage(token_for(other_user))
        # THEN each sees their own chats only, and their own figures
        assert [c["chatId"] for c in mine["chats"]] == [str(chat_id)]
        assert [c["chatId"] for c in theirs["chats"]] == [str(other_chat)]
        assert mine["total"]["turns"] == 1
        assert theirs["total"]["turns"] == 2
        truth = await recorded(database_url, user_id)
        assert without_cost(mine["total"]) == truth[str(chat_id), "scripted"]

        # WHEN the user asks for another user's chat, or a chat that does not exist
        for chat in (other_chat, uuid.uuid4()):
            response = await stack.usage_response(token_for(user_id), chatId=str(chat))
            # THEN it is not found, the same for both
            assert response.status_code == 404
            assert response.json() == {
                "error": {"code": "chat_not_found", "message": "Chat not found."}
            }

        # WHEN the user edits their replies' usage, then deletes their chat, as the Data API
        # lets them
        await execute(
            database_url,
            "update message set metadata = metadata - 'usage' where chat_id = %s",
            chat_id,
        )
        after_edit = await stack.usage(token_for(user_id))
        await execute(database_url, "delete from chat where id = %s", chat_id)
        after_delete = await stack.usage(token_for(user_id))
        deleted_chat = await stack.usage_response(token_for(user_id), chatId=str(chat_id))
        # THEN what they used stays counted; the deleted chat has no title and no report of
        # its own
        assert after_edit == mine
        assert after_delete["total"] == mine["total"]
        assert [(c["chatId"], c["title"]) for c in after_delete["chats"]] == [(str(chat_id), None)]
        assert deleted_chat.status_code == 404

        # AND without a valid token there is no report
        response = await stack.usage_response(None)
        assert (response.status_code, response.json()["error"]["code"]) == (401, "unauthorized")


# Time passes for the usage: the chat's replies were recorded `days` ago.
AGE_SQL = """
update public.reply_usage set created_at = created_at - make_interval(days => %s)
where chat_id = %s
"""


async def test_a_window_of_days_or_dates(database_url: str) -> None:
    user_id, old_chat = await create_user_with_chat(database_url)
    new_chat = await add_chat(database_url, user_id, "new")
    async with in_process_app(database_url) as stack:
        # GIVEN a turn 10 days ago and one today
        assert await quick_turn(stack, user_id, old_chat, "long ago") == "done"
        assert await quick_turn(stack, user_id, new_chat, "today") == "done"
        await execute(database_url, AGE_SQL, 10, old_chat)

        def chats(report: dict[str, Any]) -> list[str]:
            return sorted(c["chatId"] for c in report["chats"])

        both = sorted([str(old_chat), str(new_chat)])
        # WHEN the window is today, then the last 7 days, then the last 11
        today = await stack.usage(token_for(user_id), days=1)
        week = await stack.usage(token_for(user_id), days=7)
        eleven = await stack.usage(token_for(user_id), days=11)
        # THEN each holds the turns recorded within it, and says where it starts
        assert chats(today) == chats(week) == [str(new_chat)]
        assert chats(eleven) == both
        assert today["since"].endswith("T00:00:00Z")
        assert today["until"] is None
        assert today["total"]["turns"] == 1

        # WHEN the window is given by dates and times (UTC unless they say otherwise)
        [row] = await fetch(
            database_url,
            "select (now() at time zone 'UTC')::date as today,"
            " (now() at time zone 'UTC')::date - 5 as five_days_ago",
        )
        since_then = await stack.usage(token_for(user_id), since=str(row["five_days_ago"]))
        before_then = await stack.usage(token_for(user_id), until=str(row["five_days_ago"]))
        offset = f"{row['five_days_ago']}T02:00:00+02:00"  # midnight UTC
        with_offset = await stack.usage(token_for(user_id), until=offset)
        assert chats(since_then) == [str(new_chat)]
        assert chats(before_then) == chats(with_offset) == [str(old_chat)]
        assert with_offset["until"] == f"{row['five_days_ago']}T00:00:00Z"

        # WHEN the window is not one
        token = token_for(user_id)
        cases = [
            await stack.usage_response(token, days=7, since="2024-01-01"),
            await stack.usage_response(token, since="2024-02-01", until="2024-01-01"),
            await stack.usage_response(token, days=0),
            await stack.usage_response(token, days=367),
            await stack.usage_response(token, since="yesterday"),
            # Not a Unix time, nor a day that does not exist.
            await stack.usage_response(token, since=0),
            await stack.usage_response(token, until="2025-02-30"),
            await stack.usage_response(token, chatId=42),
            # A misspelt parameter is refused, not ignored.
            await stack.usage_response(token, chat_id=str(new_chat)),
        ]
        # THEN it is refused with a JSON error
        assert [(r.status_code, r.json()["error"]["code"]) for r in cases] == [
            (422, "invalid_request")
        ] * len(cases)
        assert "days cannot be combined" in cases[0].json()["error"]["message"]
        assert "until: not a valid date or time" in cases[-3].json()["error"]["message"]
        assert "unknown query parameter 'chat_id'" in cases[-1].json()["error"]["message"]


async def test_a_user_without_usage_gets_zeros(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url, model_prices=PRICES) as stack:
        report = await stack.usage(token_for(user_id))
    zeros = {"turns": 0, "inputTokens": 0, "outputTokens": 0, "toolCalls": 0}
    assert report["total"] == {**zeros, "estimatedCostUsd": 0.0}
    assert (report["models"], report["chats"]) == ([], [])


async def test_a_turn_canceled_in_the_background_counts_the_rounds_it_stored(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    email = '/send_email {"to": "ada@example.com", "subject": "Minutes"}'
    async with running_stack(database_url) as stack:
        # GIVEN a turn whose tool ran, whose second round then asked for an approval
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": f"/calc 1+1\n/then\n{email}"}
        )
        reply_id = events[-1][1]["assistantMessageId"]
        await wait_for_row(
            database_url,
            "select 1 from message where id = %s and status = 'awaiting_approval'",
            reply_id,
        )
        # WHEN the user cancels it
        response = await stack.cancel(token_for(user_id), chat_id)
        assert response.status_code == 202
        await stack.executor.wait_idle()
        report = await stack.usage(token_for(user_id))
    # THEN both its model rounds count, and its one tool call that ran
    [reply] = await fetch(
        database_url, "select status, metadata from message where id = %s", reply_id
    )
    assert reply["status"] == "canceled"
    used = reply["metadata"]["usage"]
    assert len(used["rounds"]) == 2
    assert without_cost(report["total"]) == {
        "turns": 1,
        "inputTokens": used["input"],
        "outputTokens": used["output"],
        "toolCalls": 1,
    }
