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

from tests.api import sse
from tests.security.server_log import describe, logged_exceptions
from tests.support import (
    create_user_with_chat,
    execute,
    fetch,
    in_process_app,
    token_for,
)


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
    async with in_process_app(database_url) as stack:
        response = await stack.call(
            "POST",
            "/api/chat/respond",
            None,
            {"chatId": str(chat_id), "content": "hi"},
            headers=make_headers(user_id),
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
    async with in_process_app(database_url) as stack:
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
    async with in_process_app(database_url) as stack:
        with logged_exceptions() as exceptions:
            response = await stack.respond_response(
                token_for(user_id), {"chatId": str(chat_id), "content": content}
            )
    assert response.status_code == status, response.text
    # An answered request that still logs a traceback pages whoever watches the errors.
    assert exceptions == [], describe(exceptions)


async def test_a_message_id_from_anywhere_else_answers_as_a_fresh_one(
    database_url: str,
) -> None:
    # GIVEN a victim's finished turn, sent with an id of the client's choosing
    victim, victim_chat = await create_user_with_chat(database_url)
    intruder, intruder_chat = await create_user_with_chat(database_url)
    victim_second_chat = uuid.uuid4()
    await execute(
        database_url,
        "insert into public.chat (id, user_id) values (%s, %s)",
        victim_second_chat,
        victim,
    )
    client_id = str(uuid.uuid4())
    async with in_process_app(database_url) as stack:

        async def send(user: uuid.UUID, chat: uuid.UUID, message_id: str) -> tuple[int, Any]:
            body = {"chatId": str(chat), "content": "hello", "userMessageId": message_id}
            response = await stack.respond_response(token_for(user), body)
            if response.status_code != 200:
                return response.status_code, response.json()
            events = sse(response)
            return 200, ([name for name, _ in events], events[0][1]["userMessageId"])

        await stack.respond(
            token_for(victim),
            {"chatId": str(victim_chat), "content": "secret", "userMessageId": client_id},
        )
        [stored] = await fetch(database_url, "select id from message where role = 'user'")
        before = await fetch(database_url, "select * from message order by created_at")

        # WHEN the intruder sends into their own chat under the victim's id, the client's or
        # the stored one, and under a fresh one
        answers = [
            await send(intruder, intruder_chat, message_id)
            for message_id in (client_id, str(stored["id"]), str(uuid.uuid4()))
        ]
        # AND the victim reuses their id in another chat of theirs
        answers.append(await send(victim, victim_second_chat, client_id))
        # AND the intruder sends their first message again
        again = await send(intruder, intruder_chat, client_id)

    # THEN every one is answered as a fresh id is, under an id of its own
    assert [status for status, _ in answers] == [200] * 4
    assert len({str(names) for _, (names, _) in answers}) == 1
    ids = [message_id for _, (_, message_id) in answers]
    assert len(set(ids)) == 4
    assert not {client_id, str(stored["id"])} & set(ids)
    # AND only a send again into the same chat is the same message
    status, body = again
    assert (status, body["error"]["code"]) == (409, "duplicate_message")
    # AND the victim's messages are as they were
    after = await fetch(database_url, "select * from message order by created_at")
    assert [row for row in after if row["chat_id"] == victim_chat] == before
