"""A request names its assistant by id, or names none for the deployment's default; an id no
assistant has is a 404 `assistant_not_found`, and nothing is stored."""

from __future__ import annotations

import uuid

import httpx

from tests.api import ok
from tests.support import create_user_with_chat, fetch, in_process_app, token_for


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


async def test_an_unknown_assistant_is_404_and_nothing_is_stored(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        body = {"chatId": str(chat_id), "content": "hi", "assistantId": "nobody"}
        refused = await stack.respond_response(token, body)
        assert_error(refused, 404, "assistant_not_found")
        # the message names the id asked for
        assert refused.json()["error"]["message"] == "No such assistant: nobody."
        history = await stack.history_response(token, chat_id, assistantId="nobody")
        assert_error(history, 404, "assistant_not_found")
        branches = await stack.branches_response(token, chat_id, assistantId="nobody")
        assert_error(branches, 404, "assistant_not_found")
        canceled = await stack.cancel(token, chat_id, assistantId="nobody")
        assert_error(canceled, 404, "assistant_not_found")
        message = uuid.uuid4()
        regenerated = await stack.regenerate_response(token, chat_id, message, assistantId="nobody")
        assert_error(regenerated, 404, "assistant_not_found")
    assert await fetch(database_url, "select * from message") == []
    assert await fetch(database_url, "select * from job_runs") == []


async def test_no_assistant_named_is_the_default_one(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "hi"})
        assert events[0][1]["threadId"] == f"{chat_id}:default"
        named = await stack.history(token, chat_id, assistantId="default")
        unnamed = ok(await stack.history_response(token, chat_id))
    assert named == unnamed
    assert [m["content"] for m in named["messages"]] == ["hi", 'You said: "hi"']
