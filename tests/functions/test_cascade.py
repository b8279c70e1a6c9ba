"""An edit's cascade: the replies that heard what an edit replaced are regenerated, in chat
order, CASCADE_LIMIT at a time, past which the editor decides; each replaced reply points to
its replacement, and nothing is deleted. Through the real app, the real serve endpoint and the
local executor, with Inngest's latency in front of /api/inngest."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from agent.assistants import Assistants
from demo.assistants import ASSISTANTS as DEMO_ASSISTANTS
from tests.support import (
    Stack,
    create_user_with_chat,
    durable_messages,
    execute,
    fetch,
    running_stack,
    token_for,
    wait_for_row,
)

CHAIN = 7
CALL_DELAY_S = 0.05


def two_assistants() -> Assistants:
    """Two scripted assistants of the tests' own, Alpha (the default) and Beta."""
    helper = DEMO_ASSISTANTS[0]
    return Assistants(
        [
            replace(helper, id="alpha", name="Alpha", tools=()),
            replace(helper, id="beta", name="Beta", tools=()),
        ]
    )


@dataclass(frozen=True)
class Chain:
    stack: Stack
    token: str
    chat_id: uuid.UUID
    first: str  # the user message every reply of the chain depends on
    replies: list[str]  # the chain's later replies, in chat order


@asynccontextmanager
async def chain(database_url: str, length: int = CHAIN, **settings: Any) -> AsyncIterator[Chain]:
    """A chat of Alpha and Beta: a first message to Alpha, then `length` messages, each to the
    other assistant, so that each reply heard the one before it."""
    user_id, chat_id = await create_user_with_chat(database_url, assistants=["alpha", "beta"])
    token = token_for(user_id)
    async with running_stack(
        database_url, assistants=two_assistants(), wait_recheck_s=1, **settings
    ) as stack:
        # Inngest's latency in front of /api/inngest: the waits for each regenerated reply and
        # for the card begin a round trip after the step that asked.
        stack.executor.call_delay_s = CALL_DELAY_S
        first = await stack.respond(token, {"chatId": str(chat_id), "content": "@alpha start"})
        replies = []
        for n in range(1, length + 1):
            who = "beta" if n % 2 else "alpha"
            body = {"chatId": str(chat_id), "content": f"@{who} step {n}"}
            replies.append((await stack.respond(token, body))[0][1]["assistantMessageId"])
        await stack.executor.wait_idle()
        yield Chain(stack, token, chat_id, first[0][1]["userMessageId"], replies)


async def edit_first(c: Chain) -> None:
    body = {"chatId": str(c.chat_id), "content": "@alpha start anew", "editOf": c.first}
    await c.stack.respond(c.token, body)


async def cascade_row(database_url: str, status: str) -> dict[str, Any]:
    return await wait_for_row(database_url, "select * from cascade where status = %s", status)


async def replaced(database_url: str, replies: list[str]) -> dict[str, str | None]:
    rows = await fetch(
        database_url,
        "select id, metadata ->> 'replacedBy' as by from message where id = any(%s)",
        [uuid.UUID(r) for r in replies],
    )
    return {str(r["id"]): r["by"] for r in rows}


async def test_the_dependents_of_a_message_come_from_one_query(database_url: str) -> None:
    async with chain(database_url) as c:
        # WHEN the dependents of the first message are read
        rows = await fetch(
            database_url,
            "select reply_id, kind from reply_source where message_id = %s order by kind",
            uuid.UUID(c.first),
        )
    # THEN Alpha's reply is the one it started, and Beta's first reply heard it
    kinds = {str(r["reply_id"]): r["kind"] for r in rows}
    assert kinds[c.replies[0]] == "context"
    assert sorted(kinds.values()).count("started") == 1


async def test_a_cascade_of_seven_stops_at_the_limit_and_goes_on_once_approved(
    database_url: str,
) -> None:
    async with chain(database_url, cascade_limit=5) as c:
        # WHEN the first message is edited
        await edit_first(c)
        card = await cascade_row(database_url, "awaiting_approval")
        # THEN five dependents are regenerated, in chat order, and the card counts two more
        assert (card["regenerated"], card["remaining"]) == (5, 2)
        by = await replaced(database_url, c.replies)
        assert [by[r] is not None for r in c.replies] == [True] * 5 + [False] * 2
        # AND the history shows the card
        history = await c.stack.history(c.token, c.chat_id)
        [pending] = history["pendingCascades"]
        assert (pending["id"], pending["remaining"]) == (str(card["id"]), 2)
        # AND a decision that is not one is refused, and the card still waits
        path = f"/api/chat/{c.chat_id}/cascades/{card['id']}/decision"
        bad = await c.stack.call("POST", path, c.token, {"approved": "maybe", "extra": 1})
        assert bad.status_code == 422, bad.text
        assert bad.json()["error"]["code"] == "invalid_request"
        [still] = await fetch(database_url, "select * from cascade where id = %s", card["id"])
        assert (still["status"], still["decision"]) == ("awaiting_approval", None)
        # WHEN the editor approves
        response = await c.stack.call(
            "POST",
            f"/api/chat/{c.chat_id}/cascades/{card['id']}/decision",
            c.token,
            {"approved": True},
        )
        assert response.status_code == 202, response.text
        done = await cascade_row(database_url, "completed")
        await c.stack.executor.wait_idle()
        by = await replaced(database_url, c.replies)
        beta = await durable_messages(database_url, c.chat_id, "beta")
        shown = {m["id"]: m for m in await c.stack.messages(c.token, c.chat_id, all="true")}
    # THEN all seven are regenerated, each pointing to its replacement, none deleted
    assert done["regenerated"] == CHAIN
    assert all(by[r] is not None for r in c.replies)
    assert all(shown[r]["replacedBy"] == by[r] and shown[r]["stale"] for r in c.replies)
    news = await replaced(database_url, [str(v) for v in by.values() if v])
    assert all(v is None for v in news.values())
    # AND Beta's regenerated first reply heard the edit's new text
    heard = [m.content for m in beta]
    assert any("start anew" in str(h) for h in heard), heard


async def test_a_declined_card_leaves_the_rest_stale(database_url: str) -> None:
    async with chain(database_url, cascade_limit=5) as c:
        await edit_first(c)
        card = await cascade_row(database_url, "awaiting_approval")
        path = f"/api/chat/{c.chat_id}/cascades/{card['id']}/decision"
        # A member of the chat sees the card, but its turns are the editor's to let go on
        member = uuid.uuid4()
        await execute(database_url, "insert into auth.users (id) values (%s)", member)
        added = await c.stack.add_member(c.token, c.chat_id, userId=str(member))
        assert added.status_code == 201, added.text
        refused = await c.stack.call("POST", path, token_for(member), {"approved": True})
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "not_turn_starter"
        response = await c.stack.call("POST", path, c.token, {"approved": False})
        assert response.status_code == 202, response.text
        await cascade_row(database_url, "declined")
        await c.stack.executor.wait_idle()
        by = await replaced(database_url, c.replies)
        rest = await fetch(
            database_url,
            "select metadata from message where id = any(%s)",
            [uuid.UUID(r) for r in c.replies[5:]],
        )
    assert [by[r] is not None for r in c.replies] == [True] * 5 + [False] * 2
    assert all(r["metadata"].get("cascade") == "declined" for r in rest)


async def replies_in(database_url: str, chat_id: uuid.UUID) -> int:
    rows = await fetch(
        database_url,
        "select count(*) as n from message where chat_id = %s and role = 'assistant'",
        chat_id,
    )
    return int(rows[0]["n"])


async def test_a_crash_mid_cascade_resumes_without_doubling(database_url: str) -> None:
    async with chain(database_url, cascade_limit=10) as c:
        # GIVEN the third regeneration's step loses its output once, after it ran
        c.stack.executor.drop_step_output(f"regenerate-{c.replies[2]}")
        # WHEN the first message is edited
        await edit_first(c)
        done = await cascade_row(database_url, "completed")
        await c.stack.executor.wait_idle()
        by = await replaced(database_url, c.replies)
        total = await replies_in(database_url, c.chat_id)
        [run] = [
            r for r in c.stack.executor.runs() if r.function_id.endswith("cascade-regeneration")
        ]
    # THEN the step ran again after its lost output
    assert run.attempts[f"regenerate-{c.replies[2]}"] == 2
    # AND every dependent is regenerated once: the chain, the edit's reply and seven new ones
    assert done["regenerated"] == CHAIN
    assert all(by[r] is not None for r in c.replies)
    assert total == 1 + CHAIN + 1 + CHAIN


async def test_a_replay_regenerates_nothing_twice(database_url: str) -> None:
    async with chain(database_url, length=3) as c:
        await edit_first(c)
        done = await cascade_row(database_url, "completed")
        await c.stack.executor.wait_idle()
        before = await replies_in(database_url, c.chat_id)
        # WHEN the cascade's function runs again with the same event
        await c.stack.executor.replay(str(done["id"]))
        await c.stack.executor.wait_idle()
        after = await replies_in(database_url, c.chat_id)
        [row] = await fetch(database_url, "select * from cascade where id = %s", done["id"])
    # THEN nothing more was regenerated
    assert after == before == 1 + 3 + 1 + 3
    assert (row["status"], row["regenerated"]) == ("completed", 3)


async def test_cancel_stops_the_cascade_before_its_next_regeneration(database_url: str) -> None:
    async with chain(database_url, cascade_limit=5) as c:
        await edit_first(c)
        card = await cascade_row(database_url, "awaiting_approval")
        # WHEN the editor cancels it rather than deciding
        path = f"/api/chat/{c.chat_id}/cascades/{card['id']}"
        response = await c.stack.call("POST", f"{path}/cancel", c.token)
        assert response.status_code == 202, response.text
        await c.stack.executor.wait_idle()
        by = await replaced(database_url, c.replies)
        [row] = await fetch(database_url, "select * from cascade where id = %s", card["id"])
        history = await c.stack.history(c.token, c.chat_id)
        # AND a decision or a second cancel finds nothing waiting: 404, nothing stored
        late = await c.stack.call("POST", f"{path}/decision", c.token, {"approved": True})
        again = await c.stack.call("POST", f"{path}/cancel", c.token)
    assert (row["status"], row["regenerated"]) == ("canceled", 5)
    assert [by[r] is not None for r in c.replies] == [True] * 5 + [False] * 2
    assert history["pendingCascades"] == []
    assert late.status_code == again.status_code == 404
    assert late.json()["error"]["code"] == "cascade_not_found"
    runs = [r for r in c.stack.executor.runs() if r.function_id.endswith("cascade-regeneration")]
    assert [r.status for r in runs] == ["cancelled"]


async def test_a_second_edit_supersedes_the_running_cascade(database_url: str) -> None:
    async with chain(database_url, cascade_limit=5) as c:
        await edit_first(c)
        first = await cascade_row(database_url, "awaiting_approval")
        # WHEN the edit is edited again while its cascade waits on its card
        body = {
            "chatId": str(c.chat_id),
            "content": "@alpha once more",
            "editOf": str(first["replacement_id"]),
        }
        await c.stack.respond(c.token, body)
        second = await wait_for_row(
            database_url,
            "select * from cascade where id <> %s and status = 'completed'",
            first["id"],
        )
        await c.stack.executor.wait_idle()
        [old] = await fetch(database_url, "select * from cascade where id = %s", first["id"])
        by = await replaced(database_url, c.replies)
    # THEN the first cascade stops where it was, superseded, and the second regenerates what
    # depends on its own edit: the five replies the first made
    assert (old["status"], old["regenerated"]) == ("superseded", 5)
    assert second["regenerated"] == 5
    again = await replaced(database_url, [str(by[r]) for r in c.replies[:5]])
    assert all(v is not None for v in again.values())
    # AND the two the first never reached stay as they were
    assert [by[r] for r in c.replies[5:]] == [None, None]


async def test_a_cascade_whose_event_was_lost_is_sent_by_the_relay(database_url: str) -> None:
    async with chain(database_url, length=2, outbox_grace_s=0) as c:
        # GIVEN Inngest refuses every try of the edit's cascade event
        c.stack.executor.refuse_events(5)
        await edit_first(c)
        unsent = await wait_for_row(
            database_url, "select * from cascade where event_sent_at is null"
        )
        await c.stack.executor.wait_idle()
        # WHEN the outbox relay runs
        c.stack.executor.fire(f"{c.stack.settings.inngest_app_id}-outbox-relay")
        done = await cascade_row(database_url, "completed")
        await c.stack.executor.wait_idle()
    # THEN the cascade ran, once
    assert done["id"] == unsent["id"]
    assert done["regenerated"] == 2
