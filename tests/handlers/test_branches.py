"""Regenerating a reply forks the thread; the branches are listed, one is active, and the history
and the next message follow it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from handlers.app import create_app
from infra.settings import Settings
from infra.store.statuses import UNFINISHED_STATUSES, JobStatus
from tests.support import (
    JWT_SECRET,
    Stack,
    create_user_with_chat,
    durable_messages,
    execute,
    insert_message,
    parse_sse,
    running_stack,
    token_for,
)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def say(stack: Stack, token: str, chat_id: uuid.UUID, content: str) -> dict[str, Any]:
    events = await stack.respond(token, {"chatId": str(chat_id), "content": content})
    assert events[-1][0] in ("done", "handoff"), events
    return events[0][1]


async def regenerate(
    stack: Stack, token: str, chat_id: uuid.UUID, message_id: str, **body: Any
) -> list[tuple[str, dict[str, Any]]]:
    async with stack.http.stream(
        "POST",
        f"/api/chat/{chat_id}/messages/{message_id}/regenerate",
        json=body or None,
        headers=auth(token),
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return parse_sse(await response.aread())


async def history(stack: Stack, token: str, chat_id: uuid.UUID, **params: str) -> Any:
    response = await stack.http.get(
        f"/api/chat/{chat_id}/history", params=params, headers=auth(token)
    )
    assert response.status_code == 200, response.text
    return response.json()


async def branches(stack: Stack, token: str, chat_id: uuid.UUID) -> Any:
    response = await stack.http.get(f"/api/chat/{chat_id}/branches", headers=auth(token))
    assert response.status_code == 200, response.text
    return response.json()


async def activate(stack: Stack, token: str, chat_id: uuid.UUID, branch: str) -> None:
    response = await stack.http.post(
        f"/api/chat/{chat_id}/branches/{branch}/activate", headers=auth(token)
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"activeBranchId": branch}


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


async def test_a_regenerated_reply_is_a_branch_the_history_switches_to_and_back(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        # GIVEN a conversation of two turns
        first = await say(stack, token, chat_id, "first question")
        second = await say(stack, token, chat_id, "second question")
        main_path = ids((await history(stack, token, chat_id))["messages"])
        assert main_path == [
            first["userMessageId"],
            first["assistantMessageId"],
            second["userMessageId"],
            second["assistantMessageId"],
        ]

        # WHEN the user asks for another answer to the second question
        events = await regenerate(stack, token, chat_id, second["assistantMessageId"])

        # THEN it streams as respond does: a new reply to the same user message
        assert events[0][0] == "metadata"
        assert events[-1][0] == "done"
        meta = events[0][1]
        assert meta["userMessageId"] == second["userMessageId"]
        new_reply = meta["assistantMessageId"]
        assert new_reply != second["assistantMessageId"]
        assert "".join(d["text"] for e, d in events if e == "token") == events[-1][1]["content"]
        # AND the history shows the new branch: the same question, the new answer
        shown = await history(stack, token, chat_id)
        assert shown["branchId"] == new_reply
        assert ids(shown["messages"]) == [*main_path[:3], new_reply]
        assert shown["messages"][-1]["parentMessageId"] == second["userMessageId"]
        assert not any(m["stale"] for m in shown["messages"])
        # AND both branches are listed, the new one active
        listed = await branches(stack, token, chat_id)
        assert listed["activeBranchId"] == new_reply
        by_id = {b["id"]: b for b in listed["branches"]}
        assert set(by_id) == {"main", new_reply}
        assert by_id["main"]["forkedFrom"] is None
        assert by_id["main"]["latestMessage"]["id"] == second["assistantMessageId"]
        assert by_id[new_reply]["forkedFrom"] == second["assistantMessageId"]
        assert by_id[new_reply]["latestMessage"]["id"] == new_reply
        assert (by_id["main"]["active"], by_id[new_reply]["active"]) == (False, True)
        # AND every message is kept: the old reply is off the active branch
        everything = await history(stack, token, chat_id, all="true")
        assert len(everything["messages"]) == 5
        stale = [m["id"] for m in everything["messages"] if m["stale"]]
        assert stale == [second["assistantMessageId"]]

        # WHEN the user switches back to main, THEN the history follows
        await activate(stack, token, chat_id, "main")
        shown = await history(stack, token, chat_id)
        assert (shown["branchId"], ids(shown["messages"])) == ("main", main_path)
        everything = await history(stack, token, chat_id, all="true")
        assert [m["id"] for m in everything["messages"] if m["stale"]] == [new_reply]
        # AND another branch is there on request, without switching
        other = await history(stack, token, chat_id, branchId=new_reply)
        assert ids(other["messages"]) == [*main_path[:3], new_reply]
        assert (await branches(stack, token, chat_id))["activeBranchId"] == "main"

        # AND forth again
        await activate(stack, token, chat_id, new_reply)
        shown = await history(stack, token, chat_id)
        assert ids(shown["messages"]) == [*main_path[:3], new_reply]

        # AND the user message itself may be named: a third answer, forked from the active one
        events = await regenerate(stack, token, chat_id, second["userMessageId"])
        third = events[0][1]["assistantMessageId"]
        assert events[0][1]["userMessageId"] == second["userMessageId"]
        listed = await branches(stack, token, chat_id)
        assert {b["id"]: b["forkedFrom"] for b in listed["branches"]}[third] == new_reply
        assert ids((await history(stack, token, chat_id))["messages"]) == [
            *main_path[:3],
            third,
        ]


async def test_a_message_continues_the_branch_that_was_activated(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        # GIVEN a question answered twice (main, then a regenerated branch that went on)
        asked = await say(stack, token, chat_id, "question")
        events = await regenerate(stack, token, chat_id, asked["assistantMessageId"])
        branch = events[0][1]["assistantMessageId"]
        await say(stack, token, chat_id, "on the new branch")
        assert "on the new branch" in [
            str(m.content) for m in await durable_messages(database_url, chat_id)
        ]

        # WHEN the user activates main again and goes on there
        await activate(stack, token, chat_id, "main")
        went_on = await say(stack, token, chat_id, "back on main")

        # THEN the model's input was main's messages, not the other branch's
        thread = await durable_messages(database_url, chat_id)
        assert [str(m.content) for m in thread if isinstance(m, HumanMessage)] == [
            "question",
            "back on main",
        ]
        replies = [m for m in thread if isinstance(m, AIMessage)]
        assert len(replies) == 2
        shown = await history(stack, token, chat_id)
        assert shown["branchId"] == "main"
        assert ids(shown["messages"]) == [
            asked["userMessageId"],
            asked["assistantMessageId"],
            went_on["userMessageId"],
            went_on["assistantMessageId"],
        ]
        # AND the other branch is as it was, and can be taken up again
        other = await history(stack, token, chat_id, branchId=branch)
        assert [m["content"] for m in other["messages"] if m["role"] == "user"] == [
            "question",
            "on the new branch",
        ]
        await activate(stack, token, chat_id, branch)
        await say(stack, token, chat_id, "and further")
        thread = await durable_messages(database_url, chat_id)
        assert [str(m.content) for m in thread if isinstance(m, HumanMessage)] == [
            "question",
            "on the new branch",
            "and further",
        ]


async def test_a_regenerated_tool_turn_hands_off_on_its_branch(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        asked = await say(stack, token, chat_id, "/calc 6*7")
        await stack.executor.wait_idle()
        events = await regenerate(stack, token, chat_id, asked["assistantMessageId"])
        assert events[-1][0] == "handoff"
        reply = events[0][1]["assistantMessageId"]
        await stack.executor.wait_idle()
        shown = (await history(stack, token, chat_id))["messages"]
        # The background round moved the branch's head: the next message continues from it.
        await activate(stack, token, chat_id, "main")
        await activate(stack, token, chat_id, reply)
        await say(stack, token, chat_id, "thanks")
    assert [m["id"] for m in shown] == [asked["userMessageId"], reply]
    assert shown[-1]["status"] == "completed"
    assert "calc returned 42." in shown[-1]["content"]
    thread = await durable_messages(database_url, chat_id)
    assert [str(m.content) for m in thread if isinstance(m, HumanMessage)] == [
        "/calc 6*7",
        "thanks",
    ]
    # One tool call and its result on this branch: the regenerated turn's own, after the round.
    assert sum(1 for m in thread if isinstance(m, AIMessage) and m.tool_calls) == 1
    assert "calc returned 42." in " ".join(str(m.content) for m in thread)


async def test_regenerating_waits_for_no_running_answer(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        asked = await say(stack, token, chat_id, "/sleep 2")
        # While the tool runs in the background, neither regenerating nor switching is taken.
        busy = await stack.http.post(
            f"/api/chat/{chat_id}/messages/{asked['userMessageId']}/regenerate",
            headers=auth(token),
        )
        assert (busy.status_code, busy.json()["error"]["code"]) == (409, "job_in_progress")
        switch = await stack.http.post(
            f"/api/chat/{chat_id}/branches/main/activate", headers=auth(token)
        )
        assert (switch.status_code, switch.json()["error"]["code"]) == (409, "job_in_progress")
        # Waiting is not a strategy a regenerated reply takes.
        enqueue = await stack.http.post(
            f"/api/chat/{chat_id}/messages/{asked['userMessageId']}/regenerate",
            json={"multitaskStrategy": "enqueue"},
            headers=auth(token),
        )
        assert enqueue.status_code == 422
        await stack.executor.wait_idle()
        # Nothing was stored by the refused requests: one question, one answer, one branch.
        assert len((await history(stack, token, chat_id, all="true"))["messages"]) == 2
        assert [b["id"] for b in (await branches(stack, token, chat_id))["branches"]] == ["main"]


async def test_only_the_owner_regenerates_lists_or_switches_branches(database_url: str) -> None:
    owner, chat_id = await create_user_with_chat(database_url)
    stranger, stranger_chat = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        asked = await say(stack, token_for(owner), chat_id, "private words")
        stranger_auth = auth(token_for(stranger))
        reply = asked["assistantMessageId"]

        for path, code in [
            (f"/api/chat/{chat_id}/messages/{reply}/regenerate", "chat_not_found"),
            (f"/api/chat/{chat_id}/branches/main/activate", "chat_not_found"),
            # Another user's message from the stranger's own chat: no such message there.
            (f"/api/chat/{stranger_chat}/messages/{reply}/regenerate", "message_not_found"),
        ]:
            response = await stack.http.post(path, headers=stranger_auth)
            assert (response.status_code, response.json()["error"]["code"]) == (404, code), path
            assert "private words" not in response.text
        for path in [f"/api/chat/{chat_id}/branches", f"/api/chat/{chat_id}/history"]:
            response = await stack.http.get(path, headers=stranger_auth)
            assert (response.status_code, response.json()["error"]["code"]) == (
                404,
                "chat_not_found",
            )
        response = await stack.http.get(
            f"/api/chat/{chat_id}/history", params={"branchId": "main"}, headers=stranger_auth
        )
        assert response.status_code == 404
        # The owner's unknown branch or message is a 404 too; no token is a 401.
        owner_auth = auth(token_for(owner))
        for response in [
            await stack.http.post(
                f"/api/chat/{chat_id}/branches/{uuid.uuid4()}/activate", headers=owner_auth
            ),
            await stack.http.get(
                f"/api/chat/{chat_id}/history",
                params={"branchId": str(uuid.uuid4())},
                headers=owner_auth,
            ),
        ]:
            assert (response.status_code, response.json()["error"]["code"]) == (
                404,
                "branch_not_found",
            )
        unknown = await stack.http.post(
            f"/api/chat/{chat_id}/messages/{uuid.uuid4()}/regenerate", headers=owner_auth
        )
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "message_not_found")
        assert (await stack.http.get(f"/api/chat/{chat_id}/branches")).status_code == 401
        # The owner's chat is as it was.
        assert (await branches(stack, token_for(owner), chat_id))["activeBranchId"] == "main"
        assert len((await history(stack, token_for(owner), chat_id, all="true"))["messages"]) == 2


@asynccontextmanager
async def in_process_app(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The respond app in-process: enough for requests that start no turn."""
    app = create_app(Settings(database_url=database_url, supabase_jwt_secret=JWT_SECRET))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as http,
    ):
        yield http


SEED_BRANCHES_SQL = """
insert into public.branch (chat_id, id) values (%s, 'main'), (%s, 'other')
"""
SEED_JOB_SQL = """
insert into public.job_runs
  (chat_id, root_message_id, status, kind, event_name, idempotency_key, payload)
values (%s, %s, %s, 'handoff', 'chat/tool_handoff', %s, '{}')
"""


@pytest.mark.parametrize("status", UNFINISHED_STATUSES)
async def test_no_switch_while_a_turn_has_not_ended(database_url: str, status: JobStatus) -> None:
    # GIVEN a chat with two branches and a turn in `status` (a paused one holds the chat's slot
    # like a running one: resumed, its messages land on the branch it began on)
    user_id, chat_id = await create_user_with_chat(database_url)
    reply = await insert_message(database_url, chat_id)
    await execute(database_url, SEED_BRANCHES_SQL, chat_id, chat_id)
    await execute(database_url, SEED_JOB_SQL, chat_id, reply, status, str(uuid.uuid4()))
    async with in_process_app(database_url) as http:
        # WHEN the user switches to the other branch
        switch = await http.post(
            f"/api/chat/{chat_id}/branches/other/activate", headers=auth(token_for(user_id))
        )
    # THEN the switch is refused as while any answer is being prepared
    assert switch.status_code == 409, switch.text
    assert switch.json()["error"]["code"] == "job_in_progress"
