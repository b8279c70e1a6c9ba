"""Questions the model asks (`ask_user`): the job waits for chat/user_answer, and goes on."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.api import ok
from tests.support import (
    Stack,
    create_user_with_chat,
    fetch,
    running_stack,
    sit_out_waits,
    token_for,
    wait_for_row,
)

QUESTION = {
    "question": "Which city is the meeting in?",
    "options": ["Berlin", "Lisbon"],
    "context": "The invitation does not say.",
}
ASK = f"/ask_user {json.dumps(QUESTION)}"
AWAITING_SQL = "select * from message where role = 'assistant' and status = 'awaiting_input'"
FINISHED_SQL = "select * from message where role = 'assistant' and status = 'completed'"


async def ask(stack: Stack, database_url: str) -> tuple[str, uuid.UUID, dict[str, Any]]:
    """A turn whose model asks the user: (token, chat id, the pending question)."""
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    events = await stack.respond(token, {"chatId": str(chat_id), "content": ASK})
    # The quick path hands the question to the background like any tool call.
    assert events[-1][0] == "handoff"
    message = await wait_for_row(database_url, AWAITING_SQL)
    await stack.executor.wait_idle()
    return token, chat_id, message["metadata"]["pendingQuestion"]


async def test_the_users_answer_is_the_models_tool_result(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        # GIVEN a background job waiting for the user's answer
        token, chat_id, pending = await ask(stack, database_url)
        assert {k: pending[k] for k in ("question", "options", "context")} == QUESTION
        assert pending["questionId"].startswith("call_")
        assert "expiresAt" in pending
        [wait] = stack.executor.waiting()
        assert wait.event == "chat/user_answer"
        # A page loaded now finds the question in the history too.
        waiting = (await stack.messages(token, chat_id))[-1]
        assert (waiting["status"], waiting["pendingQuestion"]) == ("awaiting_input", pending)

        # WHEN the owner answers it
        answered = await stack.answer(
            token, chat_id, pending["questionId"], answer="Lisbon, in May"
        )
        assert ok(answered, 202) == {"questionId": pending["questionId"], "answered": True}
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()

    # THEN the model read the answer as the call's result, and the question is closed
    assert "ask_user returned The user answered: Lisbon, in May." in message["content"]
    assert "pendingQuestion" not in message["metadata"]
    recorded = message["metadata"]["answers"][pending["questionId"]]
    assert recorded == {"answer": "Lisbon, in May", "timed_out": False}
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert (result["name"], result["status"]) == ("ask_user", "success")


async def test_no_answer_in_time_lets_the_model_go_on(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        _, _, pending = await ask(stack, database_url)
        # WHEN the question's time runs out
        assert await sit_out_waits(stack.executor) > 1
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
    # THEN the model hears that nobody answered, and the turn completes
    assert "The user did not answer within 30 minutes." in message["content"]
    assert message["metadata"]["answers"][pending["questionId"]] == {
        "answer": None,
        "timed_out": True,
    }


async def test_cancel_while_awaiting_input_stops_the_wait(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id, pending = await ask(stack, database_url)
        assert ok(await stack.cancel(token, chat_id), 202)["canceled"] is True
        await stack.executor.wait_idle()
        # The canceled job waits for nothing, and the question cannot be answered any more.
        assert stack.executor.waiting() == []
        late = await stack.answer(token, chat_id, pending["questionId"], answer="x")
        assert ok(late, 409)["error"]["code"] == "question_not_pending"
        run = stack.handoff_run()
    assert run.status == "cancelled"
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "canceled"
    assert await fetch(database_url, "select * from handoff.tool_results") == []


async def test_answers_come_only_from_the_owner_once(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id, pending = await ask(stack, database_url)
        question_id = pending["questionId"]
        stranger, stranger_chat = await create_user_with_chat(database_url)
        # Another user's chat is not found; from their own chat, nothing waits on this id.
        theirs = await stack.answer(token_for(stranger), chat_id, question_id, answer="Berlin")
        assert ok(theirs, 404)["error"]["code"] == "chat_not_found"
        own = await stack.answer(token_for(stranger), stranger_chat, question_id, answer="Berlin")
        assert ok(own, 409)["error"]["code"] == "question_not_pending"
        # Bad bodies and ids
        for bad in ({}, {"answer": ""}, {"answer": "   "}, {"answer": 3}, {"answer": "a", "x": 1}):
            refused = await stack.answer(token, chat_id, question_id, **bad)
            assert ok(refused, 422)["error"]["code"] == "invalid_request", bad
        ok(await stack.answer(token, chat_id, "bad'id", answer="a"), 422)
        ok(await stack.answer(token, chat_id, "call_unknown", answer="a"), 409)
        # No token
        ok(await stack.answer(None, chat_id, question_id, answer="a"), 401)

        # The owner answers once; a second answer is refused, whether or not the job settled.
        ok(await stack.answer(token, chat_id, question_id, answer="Lisbon"), 202)
        second = await stack.answer(token, chat_id, question_id, answer="Berlin")
        assert ok(second, 409)["error"]["code"] in (
            "question_already_answered",
            "question_not_pending",
        )
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
    assert message["metadata"]["answers"][question_id]["answer"] == "Lisbon"
    assert "The user answered: Lisbon." in message["content"]


async def test_questions_past_the_turns_limit_are_not_put_to_the_user(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    # Two questions at once, with room for one.
    content = f"{ASK}\n{ASK}"
    async with running_stack(database_url, max_questions_per_turn=1) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": content}
        )
        assert events[-1][0] == "handoff"
        await wait_for_row(database_url, AWAITING_SQL)
        await stack.executor.wait_idle()
        assert len(stack.executor.waiting()) == 1
        await sit_out_waits(stack.executor)
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
    results = await fetch(database_url, "select * from handoff.tool_results order by created_at")
    assert sorted(r["status"] for r in results) == ["error", "success"]
    [refused] = [r for r in results if r["status"] == "error"]
    assert "at most 1 questions may be asked in one answer" in refused["content"]
    assert "did not answer" in message["content"]
