"""Regenerate per assistant in a chat of several: a further addressee's reply (answered in the
background, in its own thread) is answered again on a new branch of that assistant's thread,
from where its turn began, with the context the replaced turn heard; the first addressee's
thread and branches are left as they were."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage

from tests.api import ok
from tests.functions.test_several_assistants import helper_and_calculator, message
from tests.support import (
    durable_messages,
    execute,
    fetch,
)


async def reply(database_url: str, reply_id: str) -> dict[str, Any]:
    [row] = await fetch(database_url, "select * from message where id = %s", uuid.UUID(reply_id))
    return row


async def test_a_further_addressees_reply_is_regenerated_on_a_branch_of_its_own_thread(
    database_url: str,
) -> None:
    async with helper_and_calculator(database_url) as (stack, token, chat_id):
        # GIVEN the helper answered once, the calculator once, then both one message (the
        # calculator first, on the quick path; the helper in the background)
        await stack.respond(token, message(chat_id, "@helper first"))
        await stack.respond(token, message(chat_id, "@calculator hi"))
        both = await stack.respond(token, message(chat_id, "@calculator @helper again"))
        await stack.executor.wait_idle()
        asked = both[0][1]
        [other] = asked["otherReplies"]
        replaced = await reply(database_url, other["assistantMessageId"])
        calculator_reply = await reply(database_url, asked["assistantMessageId"])
        [user_message] = await fetch(
            database_url, "select * from message where id = %s", uuid.UUID(asked["userMessageId"])
        )

        # WHEN the user asks the helper for another answer, by its reply
        events = await stack.regenerate(
            token, chat_id, other["assistantMessageId"], assistantId="default"
        )

        # THEN the helper answers the same message again with a new reply
        assert events[-1][0] == "done"
        meta = events[0][1]
        assert (meta["assistantId"], meta["userMessageId"]) == ("default", asked["userMessageId"])
        new_id = meta["assistantMessageId"]
        assert new_id != other["assistantMessageId"]
        new = await reply(database_url, new_id)
        assert (new["assistant_id"], new["status"]) == ("default", "completed")
        assert str(new["parent_message_id"]) == asked["userMessageId"]
        # AND it forked the helper's thread from where the replaced turn began, on a new branch
        # of the helper's, now active, the replaced reply off it
        base = replaced["metadata"]["baseCheckpointId"]
        assert base is not None  # the helper's first turn came before
        assert new["metadata"]["baseCheckpointId"] == base
        assert new["metadata"]["branchId"] == new_id
        helper = await stack.branches(token, chat_id, assistantId="default")
        assert helper["activeBranchId"] == new_id
        assert {b["id"]: b["forkedFrom"] for b in helper["branches"]} == {
            "main": None,
            new_id: other["assistantMessageId"],
        }
        assert (await reply(database_url, other["assistantMessageId"]))["metadata"]["stale"]
        # AND the regenerated turn heard what the replaced one did: the calculator's earlier
        # public reply, by name, before the message (and not the calculator's reply to it)
        [earlier] = await fetch(
            database_url,
            "select content from message where assistant_id = 'calculator' and role = 'assistant'"
            " and id <> %s",
            calculator_reply["id"],
        )
        thread = await durable_messages(database_url, chat_id, "default")
        assert [m.content for m in thread if isinstance(m, HumanMessage)] == [
            "@helper first",
            "[User] @calculator hi",
            f"[Calculator] {earlier['content']}",
            "@calculator @helper again",
        ]
        # AND the calculator's thread, reply and branches, and the message's marks, are as
        # they were
        calculator = await stack.branches(token, chat_id, assistantId="calculator")
        assert calculator["activeBranchId"] == "main"
        assert [b["id"] for b in calculator["branches"]] == ["main"]
        assert await reply(database_url, asked["assistantMessageId"]) == calculator_reply
        [after] = await fetch(
            database_url, "select metadata from message where id = %s", user_message["id"]
        )
        assert after["metadata"] == user_message["metadata"]

        # AND named by the user message, the helper answers it again from its active branch
        events = await stack.regenerate(
            token, chat_id, asked["userMessageId"], assistantId="default"
        )
        assert events[-1][0] == "done"
        third = events[0][1]["assistantMessageId"]
        helper = await stack.branches(token, chat_id, assistantId="default")
        assert {b["id"]: b["forkedFrom"] for b in helper["branches"]}[third] == new_id
        assert (await reply(database_url, third))["metadata"]["baseCheckpointId"] == base


async def test_a_reply_naming_a_checkpoint_of_another_thread_is_not_regenerated(
    database_url: str,
) -> None:
    async with helper_and_calculator(database_url) as (stack, token, chat_id):
        # GIVEN a message to both, answered by both
        await stack.respond(token, message(chat_id, "@calculator warm up"))
        both = await stack.respond(token, message(chat_id, "@calculator @helper hello"))
        await stack.executor.wait_idle()
        [other] = both[0][1]["otherReplies"]
        # AND the user rewrote the helper's reply's metadata (RLS lets them) to name a
        # checkpoint of the calculator's thread
        calculator = await reply(database_url, both[0][1]["assistantMessageId"])
        foreign = calculator["metadata"]["checkpointId"]
        await execute(
            database_url,
            "update message set metadata = metadata || jsonb_build_object("
            "'baseCheckpointId', %s::text) where id = %s",
            foreign,
            uuid.UUID(other["assistantMessageId"]),
        )
        [before] = await fetch(database_url, "select count(*) as n from message")

        # WHEN the helper's reply is to be answered again
        response = await stack.regenerate_response(
            token, chat_id, other["assistantMessageId"], assistantId="default"
        )

        # THEN it is refused, and nothing is stored
        assert ok(response, 409)["error"]["code"] == "checkpoint_not_found"
        assert await fetch(database_url, "select count(*) as n from message") == [before]
        # AND a reply the calculator did not write is no message of the calculator's to answer
        response = await stack.regenerate_response(
            token, chat_id, other["assistantMessageId"], assistantId="calculator"
        )
        assert ok(response, 404)["error"]["code"] == "message_not_found"


async def test_an_edit_is_answered_by_every_addressee_each_forking_its_own_thread(
    database_url: str,
) -> None:
    async with helper_and_calculator(database_url) as (stack, token, chat_id):
        # GIVEN the helper answered once, then both answered one message
        await stack.respond(token, message(chat_id, "@helper first"))
        both = await stack.respond(token, message(chat_id, "@calculator @helper hello"))
        await stack.executor.wait_idle()
        asked = both[0][1]
        [other] = asked["otherReplies"]
        replaced = await reply(database_url, other["assistantMessageId"])

        # WHEN the user edits the message (for the calculator, its first addressee), now asking
        # for a tool, which runs after the fork in a later round
        edited = "@calculator @helper hello again\n/calc 6*7"
        edit = {"assistantId": "calculator", "editOf": asked["userMessageId"]}
        events = await stack.respond(token, message(chat_id, edited, **edit))
        await stack.executor.wait_idle()

    # THEN the calculator answers it on the quick path, and the helper with a reply of its own
    assert events[-1][0] == "handoff"
    meta = events[0][1]
    assert meta["assistantId"] == "calculator"
    [helper_reply] = meta["otherReplies"]
    assert helper_reply["assistantId"] == "default"
    new = await reply(database_url, helper_reply["assistantMessageId"])
    assert new["status"] == "completed"
    assert "calc returned 42." in new["content"]
    [user_message] = await fetch(
        database_url, "select * from message where id = %s", uuid.UUID(meta["userMessageId"])
    )
    assert user_message["metadata"]["editOf"] == asked["userMessageId"]
    assert user_message["metadata"]["addressedTo"] == ["calculator", "default"]
    # AND the helper's thread forked from where its replaced turn began, on a branch of its own
    # that replaces its reply, now active: the edited message follows its first turn directly
    new_branch = meta["userMessageId"]
    assert new["metadata"]["branchId"] == new_branch
    assert new["metadata"]["baseCheckpointId"] == replaced["metadata"]["baseCheckpointId"]
    thread = await durable_messages(database_url, chat_id, "default")
    assert [m.content for m in thread if isinstance(m, HumanMessage)] == ["@helper first", edited]
    assert [m.content for m in thread if isinstance(m, ToolMessage)] == ["42"]
    [branch] = await fetch(
        database_url,
        "select forked_from from branch where assistant_id = 'default' and id = %s",
        new_branch,
    )
    assert str(branch["forked_from"]) == other["assistantMessageId"]
    [active] = await fetch(
        database_url, "select branch_id from active_branch where assistant_id = 'default'"
    )
    assert active["branch_id"] == new_branch
    assert (await reply(database_url, other["assistantMessageId"]))["metadata"]["stale"]
    # AND the calculator's thread forked too, from its own start
    [calculator] = await fetch(
        database_url,
        "select forked_from from branch where assistant_id = 'calculator' and id = %s",
        new_branch,
    )
    assert str(calculator["forked_from"]) == asked["userMessageId"]
