"""Regenerating a reply forks the thread; the branches are listed, one is active, and the history
and the next message follow it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from infra.store.statuses import UNFINISHED_STATUSES, JobStatus
from tests.api import ok
from tests.support import (
    Api,
    create_user_with_chat,
    durable_messages,
    execute,
    in_process_app,
    insert_message,
    running_stack,
    token_for,
)


async def say(stack: Api, token: str, chat_id: uuid.UUID, content: str) -> dict[str, Any]:
    events = await stack.respond(token, {"chatId": str(chat_id), "content": content})
    assert events[-1][0] in ("done", "handoff"), events
    return events[0][1]


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


async def test_a_regenerated_reply_is_a_branch_the_history_switches_to_and_back(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        # GIVEN a conversation of two turns
        first = await say(stack, token, chat_id, "first question")
        second = await say(stack, token, chat_id, "second question")
        main_path = ids(await stack.messages(token, chat_id))
        assert main_path == [
            first["userMessageId"],
            first["assistantMessageId"],
            second["userMessageId"],
            second["assistantMessageId"],
        ]

        # WHEN the user asks for another answer to the second question
        events = await stack.regenerate(token, chat_id, second["assistantMessageId"])

        # THEN it streams as respond does: a new reply to the same user message
        assert events[0][0] == "metadata"
        assert events[-1][0] == "done"
        meta = events[0][1]
        assert meta["userMessageId"] == second["userMessageId"]
        new_reply = meta["assistantMessageId"]
        assert new_reply != second["assistantMessageId"]
        assert "".join(d["text"] for e, d in events if e == "token") == events[-1][1]["content"]
        # AND the history shows the new branch: the same question, the new answer
        shown = await stack.history(token, chat_id)
        assert shown["branchId"] == new_reply
        assert ids(shown["messages"]) == [*main_path[:3], new_reply]
        assert shown["messages"][-1]["parentMessageId"] == second["userMessageId"]
        assert not any(m["stale"] for m in shown["messages"])
        # AND both branches are listed, the new one active
        listed = await stack.branches(token, chat_id)
        assert listed["activeBranchId"] == new_reply
        by_id = {b["id"]: b for b in listed["branches"]}
        assert set(by_id) == {"main", new_reply}
        assert by_id["main"]["forkedFrom"] is None
        assert by_id["main"]["latestMessage"]["id"] == second["assistantMessageId"]
        assert by_id[new_reply]["forkedFrom"] == second["assistantMessageId"]
        assert by_id[new_reply]["latestMessage"]["id"] == new_reply
        assert (by_id["main"]["active"], by_id[new_reply]["active"]) == (False, True)
        # AND every message is kept: the old reply is off the active branch
        everything = await stack.history(token, chat_id, all="true")
        assert len(everything["messages"]) == 5
        stale = [m["id"] for m in everything["messages"] if m["stale"]]
        assert stale == [second["assistantMessageId"]]

        # WHEN the user switches back to main, THEN the history follows
        assert ok(await stack.activate(token, chat_id, "main")) == {"activeBranchId": "main"}
        shown = await stack.history(token, chat_id)
        assert (shown["branchId"], ids(shown["messages"])) == ("main", main_path)
        everything = await stack.history(token, chat_id, all="true")
        assert [m["id"] for m in everything["messages"] if m["stale"]] == [new_reply]
        # AND another branch is there on request, without switching
        other = await stack.history(token, chat_id, branchId=new_reply)
        assert ids(other["messages"]) == [*main_path[:3], new_reply]
        assert (await stack.branches(token, chat_id))["activeBranchId"] == "main"

        # AND forth again
        assert ok(await stack.activate(token, chat_id, new_reply)) == {"activeBranchId": new_reply}
        shown = await stack.history(token, chat_id)
        assert ids(shown["messages"]) == [*main_path[:3], new_reply]

        # AND the user message itself may be named: a third answer, forked from the active one
        events = await stack.regenerate(token, chat_id, second["userMessageId"])
        third = events[0][1]["assistantMessageId"]
        assert events[0][1]["userMessageId"] == second["userMessageId"]
        listed = await stack.branches(token, chat_id)
        assert {b["id"]: b["forkedFrom"] for b in listed["branches"]}[third] == new_reply
        assert ids(await stack.messages(token, chat_id)) == [
            *main_path[:3],
            third,
        ]


async def test_a_message_continues_the_branch_that_was_activated(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        # GIVEN a question answered twice (main, then a regenerated branch that went on)
        asked = await say(stack, token, chat_id, "question")
        events = await stack.regenerate(token, chat_id, asked["assistantMessageId"])
        branch = events[0][1]["assistantMessageId"]
        await say(stack, token, chat_id, "on the new branch")
        assert "on the new branch" in [
            str(m.content) for m in await durable_messages(database_url, chat_id)
        ]

        # WHEN the user activates main again and goes on there
        assert ok(await stack.activate(token, chat_id, "main")) == {"activeBranchId": "main"}
        went_on = await say(stack, token, chat_id, "back on main")

        # THEN the model's input was main's messages, not the other branch's
        thread = await durable_messages(database_url, chat_id)
        assert [str(m.content) for m in thread if isinstance(m, HumanMessage)] == [
            "question",
            "back on main",
        ]
        replies = [m for m in thread if isinstance(m, AIMessage)]
        assert len(replies) == 2
        shown = await stack.history(token, chat_id)
        assert shown["branchId"] == "main"
        assert ids(shown["messages"]) == [
            asked["userMessageId"],
            asked["assistantMessageId"],
            went_on["userMessageId"],
            went_on["assistantMessageId"],
        ]
        # AND the other branch is as it was, and can be taken up again
        other = await stack.history(token, chat_id, branchId=branch)
        assert [m["content"] for m in other["messages"] if m["role"] == "user"] == [
            "question",
            "on the new branch",
        ]
        assert ok(await stack.activate(token, chat_id, branch)) == {"activeBranchId": branch}
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
        events = await stack.regenerate(token, chat_id, asked["assistantMessageId"])
        assert events[-1][0] == "handoff"
        reply = events[0][1]["assistantMessageId"]
        await stack.executor.wait_idle()
        shown = await stack.messages(token, chat_id)
        # The background round moved the branch's head: the next message continues from it.
        assert ok(await stack.activate(token, chat_id, "main")) == {"activeBranchId": "main"}
        assert ok(await stack.activate(token, chat_id, reply)) == {"activeBranchId": reply}
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
        busy = await stack.regenerate_response(token, chat_id, asked["userMessageId"])
        assert (busy.status_code, busy.json()["error"]["code"]) == (409, "job_in_progress")
        switch = await stack.activate(token, chat_id, "main")
        assert (switch.status_code, switch.json()["error"]["code"]) == (409, "job_in_progress")
        # Waiting is not a strategy a regenerated reply takes.
        enqueue = await stack.regenerate_response(
            token, chat_id, asked["userMessageId"], multitaskStrategy="enqueue"
        )
        assert enqueue.status_code == 422
        await stack.executor.wait_idle()
        # Nothing was stored by the refused requests: one question, one answer, one branch.
        assert len(await stack.messages(token, chat_id, all="true")) == 2
        assert [b["id"] for b in (await stack.branches(token, chat_id))["branches"]] == ["main"]


async def test_only_the_owner_regenerates_lists_or_switches_branches(database_url: str) -> None:
    owner, chat_id = await create_user_with_chat(database_url)
    stranger, stranger_chat = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        asked = await say(stack, token_for(owner), chat_id, "private words")
        stranger_token = token_for(stranger)
        reply = asked["assistantMessageId"]

        for response, code in [
            (await stack.regenerate_response(stranger_token, chat_id, reply), "chat_not_found"),
            (await stack.activate(stranger_token, chat_id, "main"), "chat_not_found"),
            # Another user's message from the stranger's own chat: no such message there.
            (
                await stack.regenerate_response(stranger_token, stranger_chat, reply),
                "message_not_found",
            ),
            (await stack.branches_response(stranger_token, chat_id), "chat_not_found"),
            (await stack.history_response(stranger_token, chat_id), "chat_not_found"),
        ]:
            assert (response.status_code, response.json()["error"]["code"]) == (404, code)
            assert "private words" not in response.text
        response = await stack.history_response(stranger_token, chat_id, branchId="main")
        assert response.status_code == 404
        # The owner's unknown branch or message is a 404 too; no token is a 401.
        owner_token = token_for(owner)
        for response in [
            await stack.activate(owner_token, chat_id, str(uuid.uuid4())),
            await stack.history_response(owner_token, chat_id, branchId=str(uuid.uuid4())),
        ]:
            assert (response.status_code, response.json()["error"]["code"]) == (
                404,
                "branch_not_found",
            )
        unknown = await stack.regenerate_response(owner_token, chat_id, uuid.uuid4())
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "message_not_found")
        assert (await stack.branches_response(None, chat_id)).status_code == 401
        # The owner's chat is as it was.
        assert (await stack.branches(token_for(owner), chat_id))["activeBranchId"] == "main"
        assert len(await stack.messages(token_for(owner), chat_id, all="true")) == 2


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
    async with in_process_app(database_url) as api:
        # WHEN the user switches to the other branch
        switch = await api.activate(token_for(user_id), chat_id, "other")
    # THEN the switch is refused as while any answer is being prepared
    assert switch.status_code == 409, switch.text
    assert switch.json()["error"]["code"] == "job_in_progress"
