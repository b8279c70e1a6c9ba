"""Who answers a message: an explicit `assistantId`, else the assistants the content
@-mentions (by id or name, in any case; not in code, URLs or e-mail addresses), else the chat's
default. Refusals (an unknown assistant, one not in the chat, too many mentions, a limit that
has no room for every reply) store nothing."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.api import Event, ok
from tests.support import create_user_with_chat, execute, fetch, in_process_app, token_for

BOTH = ["calculator", "default"]  # the chat's default first: the calculator


def message(chat_id: uuid.UUID, content: str, **extra: Any) -> dict[str, Any]:
    return {"chatId": str(chat_id), "content": content, **extra}


def answering(events: list[Event]) -> str:
    """Who the stream's `metadata` says answers."""
    kind, metadata = events[0]
    assert kind == "metadata"
    assert metadata["threadId"].endswith(f":{metadata['assistantId']}")
    return str(metadata["assistantId"])


async def stored(database_url: str) -> dict[str, int]:
    [row] = await fetch(
        database_url,
        "select (select count(*) from message) as messages,"
        " (select count(*) from job_runs) as jobs",
    )
    return dict(row)


def assert_error(response: httpx.Response, status: int, code: str) -> str:
    body = ok(response, status)
    assert body["error"]["code"] == code
    return str(body["error"]["message"])


@pytest.mark.parametrize(
    ("content", "extra", "expected"),
    [
        # No mention, no id: the chat's default (here the calculator, not the deployment's).
        ("what is 6*7?", {}, "calculator"),
        # An explicit id wins over the mentions.
        ("@calculator what is 6*7?", {"assistantId": "default"}, "default"),
        # A mention by id, by display name, in any case.
        ("@default hello", {}, "default"),
        ("@HELPER hello", {}, "default"),
        ("hello @Helper!", {}, "default"),
        # Not a mention: in a code span or block, a URL, an e-mail address; nor a name nobody
        # has, which stays plain text.
        ("`@helper` hello", {}, "calculator"),
        ("```\n@helper\n``` hello", {}, "calculator"),
        ("see https://example.com/@helper", {}, "calculator"),
        ("write to ada@helper.dev", {}, "calculator"),
        ("@nobody hello", {}, "calculator"),
    ],
)
async def test_who_answers(
    database_url: str, content: str, extra: dict[str, Any], expected: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url, assistants=BOTH)
    async with in_process_app(database_url) as stack:
        events = await stack.respond(token_for(user_id), message(chat_id, content, **extra))
    assert answering(events) == expected
    assert "otherReplies" not in events[0][1]
    assert events[-1][0] == "done"
    [user_message] = await fetch(database_url, "select * from message where role = 'user'")
    assert user_message["assistant_id"] == expected
    assert "addressedTo" not in user_message["metadata"]


async def test_a_chat_without_assistants_written_down_has_the_deployments_default(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        events = await stack.respond(token_for(user_id), message(chat_id, "hello"))
        refused = await stack.respond_response(
            token_for(user_id), message(chat_id, "@calculator hello")
        )
    assert answering(events) == "default"
    assert_error(refused, 409, "assistant_not_in_chat")


async def test_an_assistant_not_in_the_chat_is_409_saying_how_to_add_it(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url, assistants=["default"])
    token = token_for(user_id)
    async with in_process_app(database_url) as stack:
        named = await stack.respond_response(
            token, message(chat_id, "hello", assistantId="calculator")
        )
        mentioned = await stack.respond_response(
            token, message(chat_id, "@helper and @Calculator, hello")
        )
        unknown = await stack.respond_response(
            token, message(chat_id, "hello", assistantId="nobody")
        )
    for response in (named, mentioned):
        words = assert_error(response, 409, "assistant_not_in_chat")
        assert "Calculator (calculator) is not in this chat" in words
        assert f"POST /api/chats/{chat_id}/assistants" in words
    assert_error(unknown, 404, "assistant_not_found")
    assert await stored(database_url) == {"messages": 0, "jobs": 0}


async def test_more_mentions_than_a_message_may_address_is_422(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url, assistants=BOTH)
    token = token_for(user_id)
    async with in_process_app(database_url, max_assistants_per_message=1) as stack:
        response = await stack.respond_response(token, message(chat_id, "@helper @calculator hi"))
        # (one mention, said twice, is one)
        once = await stack.respond(token, message(chat_id, "@calculator, @Calculator: hi"))
    words = assert_error(response, 422, "invalid_request")
    assert "MAX_ASSISTANTS_PER_MESSAGE (1)" in words
    assert answering(once) == "calculator"
    [user_message] = await fetch(database_url, "select content from message where role = 'user'")
    assert user_message["content"] == "@calculator, @Calculator: hi"


async def test_every_reply_a_message_starts_counts_against_the_active_turns(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url, assistants=BOTH)
    token = token_for(user_id)
    limits: dict[str, Any] = {"max_active_turns_per_user": 2, "max_turns_per_minute": 100}
    # GIVEN one turn of the user that has not ended (max_active - 1), in another chat
    _, busy_chat = await create_user_with_chat(database_url)
    await execute(database_url, "update chat set user_id = %s where id = %s", user_id, busy_chat)
    await execute(
        database_url,
        "insert into job_runs (chat_id, assistant_id, status, kind, event_name, idempotency_key,"
        " payload) values (%s, 'default', 'queued', 'turn', 'chat/tool_handoff', %s, '{}')",
        busy_chat,
        str(uuid.uuid4()),
    )
    before = await stored(database_url)
    async with in_process_app(database_url, **limits) as stack:
        # WHEN a message mentions two assistants: two replies, one more than there is room for
        response = await stack.respond_response(token, message(chat_id, "@helper @calculator hi"))
        # THEN it is refused, and nothing of it is stored
        assert response.status_code == 429, response.text
        assert response.json()["error"]["code"] == "too_many_active_turns"
        assert await stored(database_url) == before
        # AND a message to one of them fits
        events = await stack.respond(token, message(chat_id, "@helper hi"))
        assert events[-1][0] == "done"


async def test_every_reply_a_message_starts_counts_against_the_turns_per_minute(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url, assistants=BOTH)
    token = token_for(user_id)
    limits: dict[str, Any] = {"max_active_turns_per_user": 100, "max_turns_per_minute": 3}
    async with in_process_app(database_url, **limits) as stack:
        events = await stack.respond(token, message(chat_id, "one"))
        events = await stack.respond(token, message(chat_id, "two"))
        assert events[-1][0] == "done"
        before = await stored(database_url)
        # WHEN a message would start two turns where one more fits
        response = await stack.respond_response(token, message(chat_id, "@helper @calculator"))
        # THEN it is refused, and nothing of it is stored
        assert response.status_code == 429, response.text
        assert response.json()["error"]["code"] == "too_many_turns"
        assert await stored(database_url) == before
        # AND one turn still fits
        events = await stack.respond(token, message(chat_id, "three"))
        assert events[-1][0] == "done"
