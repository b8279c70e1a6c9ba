"""Who may do what: tokens, other users' chats, oversized input, the Inngest endpoint."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest

from handlers.auth import LEEWAY_SECONDS
from tests.support import (
    create_user_with_chat,
    fetch,
    in_process_app,
    running_stack,
    token_for,
)


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["error"]["code"] == code
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    "make_token",
    [
        pytest.param(lambda u: None, id="missing"),
        pytest.param(lambda u: "not-a-jwt", id="garbage"),
        pytest.param(lambda u: token_for(u, secret="another-secret-" + "y" * 32), id="forged"),
        pytest.param(lambda u: token_for(u, exp=int(time.time()) - 60), id="expired"),
        pytest.param(lambda u: token_for(u, aud="someone-else"), id="wrong-audience"),
        pytest.param(lambda u: token_for(u, role="anon"), id="anon-role"),
        pytest.param(lambda u: token_for(u, sub="not-a-uuid"), id="bad-subject"),
    ],
)
async def test_bad_tokens_get_401(database_url: str, make_token: Any) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        response = await stack.respond_response(
            make_token(user_id), {"chatId": str(chat_id), "content": "hi"}
        )
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    assert await fetch(database_url, "select * from message") == []


async def test_a_token_taken_once_is_refused_once_it_expires(database_url: str) -> None:
    # GIVEN a token that expires in about two seconds, past the leeway its check allows
    user_id, _ = await create_user_with_chat(database_url)
    token = token_for(user_id, exp=int(time.time()) - LEEWAY_SECONDS + 2)
    headers = {"Authorization": f"Bearer {token}"}
    async with in_process_app(database_url) as stack:
        # WHEN it is used, then used again once it has expired
        first = await stack.http.get("/api/chats", headers=headers)
        again = await stack.http.get("/api/chats", headers=headers)
        await asyncio.sleep(2.5)
        expired = await stack.http.get("/api/chats", headers=headers)
    # THEN it was taken while it held, and is refused after, though it was taken before
    assert (first.status_code, again.status_code) == (200, 200)
    assert_error(expired, 401, "unauthorized")


async def test_posting_into_another_users_chat_is_404_and_writes_nothing(database_url: str) -> None:
    _, victim_chat = await create_user_with_chat(database_url)
    intruder, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        theirs = await stack.respond_response(
            token_for(intruder), {"chatId": str(victim_chat), "content": "hi"}
        )
        missing = await stack.respond_response(
            token_for(intruder), {"chatId": str(uuid.uuid4()), "content": "hi"}
        )
    # The same answer for "not yours" and "does not exist": no existence leak.
    assert_error(theirs, 404, "chat_not_found")
    assert_error(missing, 404, "chat_not_found")
    assert theirs.json() == missing.json()
    assert await fetch(database_url, "select * from message") == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"content": "hi"}, 422, "invalid_request"),
        ({"chatId": "not-a-uuid", "content": "hi"}, 422, "invalid_request"),
        ({"chatId": "CHAT", "content": ""}, 422, "invalid_request"),
        ({"chatId": "CHAT", "content": "   "}, 422, "invalid_request"),
        ({"chatId": "CHAT", "content": "hi", "assistantId": "a:b"}, 422, "invalid_request"),
        ({"chatId": "CHAT", "content": "hi", "surprise": 1}, 422, "invalid_request"),
        ({"chatId": "CHAT", "content": "x" * 20_000}, 413, "content_too_large"),
        ({"chatId": "CHAT", "content": "x" * 70_000}, 413, "payload_too_large"),
    ],
)
async def test_invalid_input_gets_a_clear_json_error(
    database_url: str, body: dict[str, Any], status: int, code: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    if body.get("chatId") == "CHAT":
        body = {**body, "chatId": str(chat_id)}
    async with in_process_app(database_url) as stack:
        response = await stack.respond_response(token_for(user_id), body)
    assert_error(response, status, code)
    assert await fetch(database_url, "select * from message") == []


async def test_a_body_that_is_not_json_says_so_and_where(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    cut_short = f'{{"chatId": "{chat_id}", "content": "hi"'
    async with in_process_app(database_url) as stack:
        response = await stack.http.post(
            "/api/chat/respond",
            content=cut_short,
            headers={
                "Authorization": f"Bearer {token_for(user_id)}",
                "Content-Type": "application/json",
            },
        )
    assert_error(response, 422, "invalid_request")
    assert response.json()["error"]["message"] == (
        f"body: not valid JSON (Expecting ',' delimiter at character {len(cut_short)})"
    )
    assert await fetch(database_url, "select * from message") == []


async def test_a_second_message_while_a_job_runs_is_409(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(
        database_url, assistants=["default", "calculator"]
    )
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        first = await stack.respond(token, {"chatId": str(chat_id), "content": "/sleep 1"})
        assert first[-1][0] == "handoff"
        second = await stack.respond_response(token, {"chatId": str(chat_id), "content": "hello?"})
        assert_error(second, 409, "job_in_progress")
        # Another assistant in the same chat is not blocked.
        other = await stack.respond(
            token, {"chatId": str(chat_id), "content": "hello", "assistantId": "calculator"}
        )
        assert other[-1][0] == "done"
        await stack.executor.wait_idle()
        again = await stack.respond(token, {"chatId": str(chat_id), "content": "and now?"})
        assert again[-1][0] == "done"


async def test_resending_the_same_user_message_id_does_not_double_it(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    body = {"chatId": str(chat_id), "content": "hi", "userMessageId": str(uuid.uuid4())}
    async with in_process_app(database_url) as stack:
        first = await stack.respond(token_for(user_id), body)
        response = await stack.respond_response(token_for(user_id), body)
    assert_error(response, 409, "duplicate_message")
    # The first send stands as it was: one message, one reply, and the repeat changed neither.
    metadata, done = first[0][1], first[-1][1]
    assert first[-1][0] == "done"
    rows = await fetch(
        database_url, "select id, role, content, status from message order by created_at"
    )
    assert [(str(r["id"]), r["role"], r["content"], r["status"]) for r in rows] == [
        (metadata["userMessageId"], "user", "hi", "completed"),
        (done["assistantMessageId"], "assistant", done["content"], "completed"),
    ]


async def test_inngest_endpoint_rejects_unsigned_and_wrongly_signed_calls(
    database_url: str,
) -> None:
    async with in_process_app(database_url) as stack:
        url = "/api/inngest?fnId=handoff-tool-handoff&stepId=step"
        body = {"event": {"name": "chat/tool_handoff", "data": {}}, "steps": {}, "ctx": {}}
        unsigned = await stack.http.post(url, json=body)
        forged = await stack.http.post(
            url, json=body, headers={"X-Inngest-Signature": f"t={int(time.time())}&s=deadbeef"}
        )
    assert unsigned.status_code == 401
    assert forged.status_code == 401
    assert await fetch(database_url, "select * from job_runs") == []


async def test_healthz(database_url: str) -> None:
    async with in_process_app(database_url) as stack:
        response = await stack.http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
