"""The respond endpoint against hostile callers, beyond tests/handlers/test_access.py.

test_access.py covers missing, garbage, forged, expired, wrong-audience, anon-role and
bad-subject tokens and another user's chat; these are the cases it leaves out.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.security.server_log import describe, logged_exceptions
from tests.support import Stack, create_user_with_chat, fetch, running_stack, token_for


def unsigned_token(user_id: uuid.UUID) -> str:
    """`alg: none`: the claims of a valid token, and no signature at all."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {
        "sub": str(user_id),
        "aud": "authenticated",
        "role": "authenticated",
        "exp": now + 600,
    }
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


def assert_json_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == code
    assert set(response.json()["error"]) == {"code", "message"}
    assert "Traceback" not in response.text


async def post(stack: Stack, body: Any, headers: dict[str, str]) -> httpx.Response:
    return await stack.http.post("/api/chat/respond", json=body, headers=headers)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "make_headers",
    [
        pytest.param(lambda u: bearer(unsigned_token(u)), id="alg-none"),
        pytest.param(lambda u: bearer(token_for(u, exp=None)), id="no-expiry"),
        pytest.param(lambda u: bearer(token_for(u, role="service_role")), id="service-role"),
        pytest.param(
            lambda u: bearer(token_for(u, nbf=int(time.time()) + 600)), id="not-yet-valid"
        ),
        pytest.param(
            lambda u: {"Authorization": f"Basic {token_for(u)}"}, id="token-in-basic-scheme"
        ),
        pytest.param(lambda u: {"Authorization": "Bearer"}, id="empty-bearer"),
        # Python reads these as the user's UUID; Postgres (auth.uid()) cannot.
        pytest.param(lambda u: bearer(token_for(u, sub=f"urn:uuid:{u}")), id="sub-as-urn"),
        pytest.param(lambda u: bearer(token_for(u, sub=u.hex)), id="sub-without-dashes"),
        pytest.param(lambda u: bearer(token_for(u, sub=str(u).upper())), id="sub-upper-case"),
    ],
)
async def test_more_bad_tokens_get_401(database_url: str, make_headers: Any) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        response = await post(
            stack, {"chatId": str(chat_id), "content": "hi"}, make_headers(user_id)
        )
    assert_json_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    assert await fetch(database_url, "select * from message") == []


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("nul \u0000 byte", id="nul"),
        pytest.param("lone \ud800 surrogate", id="lone-surrogate"),
    ],
)
async def test_text_postgres_cannot_store_is_a_422_not_a_crash(
    database_url: str, content: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    # json.dumps escapes both, as a browser's JSON.stringify would send them.
    body = json.dumps({"chatId": str(chat_id), "content": content})
    async with running_stack(database_url) as stack:
        response = await stack.http.post(
            "/api/chat/respond",
            content=body,
            headers={**bearer(token_for(user_id)), "content-type": "application/json"},
        )
    assert_json_error(response, 422, "invalid_request")
    assert await fetch(database_url, "select * from message") == []


@pytest.mark.parametrize(
    ("content", "status"),
    [
        pytest.param("   ", 422, id="blank-content"),
        pytest.param("x" * 20_000, 413, id="content-too-long"),
    ],
)
async def test_an_error_answer_leaves_no_unhandled_exception_behind(
    database_url: str, content: str, status: int
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        with logged_exceptions() as exceptions:
            response = await post(
                stack, {"chatId": str(chat_id), "content": content}, bearer(token_for(user_id))
            )
    assert response.status_code == status, response.text
    # An answered request that still logs a traceback pages whoever watches the errors.
    assert exceptions == [], describe(exceptions)


async def test_reusing_someone_elses_message_id_changes_nothing_of_theirs(
    database_url: str,
) -> None:
    # GIVEN a victim's finished turn
    victim, victim_chat = await create_user_with_chat(database_url)
    intruder, intruder_chat = await create_user_with_chat(database_url)
    message_id = str(uuid.uuid4())
    async with running_stack(database_url) as stack:
        await stack.respond(
            token_for(victim),
            {"chatId": str(victim_chat), "content": "secret", "userMessageId": message_id},
        )
        before = await fetch(database_url, "select * from message order by created_at")
        # WHEN the intruder sends a message into their own chat under the victim's message id
        response = await post(
            stack,
            {"chatId": str(intruder_chat), "content": "mine now", "userMessageId": message_id},
            bearer(token_for(intruder)),
        )
    # THEN it is refused, and the victim's messages are as they were
    assert_json_error(response, 409, "duplicate_message")
    assert await fetch(database_url, "select * from message order by created_at") == before
