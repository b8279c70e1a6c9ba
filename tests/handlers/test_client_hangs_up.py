"""A client that hangs up mid-stream: the request still lasts until the turn is stored.

On Lambda the end of a request is when the platform may freeze the process, so the turn must be
done by then, not merely running.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Message

from handlers.app import create_app
from infra.settings import Settings
from tests.support import JWT_SECRET, create_user_with_chat, fetch, token_for


async def test_the_request_ends_only_once_the_turn_is_stored(database_url: str) -> None:
    # GIVEN the app, and a client that sends its message and hangs up at once
    user_id, chat_id = await create_user_with_chat(database_url)
    settings = Settings.model_validate(
        {
            "database_url": database_url,
            "supabase_jwt_secret": JWT_SECRET,
            "inngest_dev": "1",
            "scripted_token_delay_ms": 20,
        }
    )
    app = create_app(settings)
    body = json.dumps({"chatId": str(chat_id), "content": "a reply that takes a while"}).encode()
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": "/api/chat/respond",
        "raw_path": b"/api/chat/respond",
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 50000),
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"authorization", f"Bearer {token_for(user_id)}".encode()),
        ],
    }
    requests = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        return requests.pop(0) if requests else {"type": "http.disconnect"}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    # WHEN the app handles the request
    try:
        await app(scope, receive, send)
        # THEN by the time it returns, the reply is stored and the chat's slot is free
        [reply] = await fetch(database_url, "select * from message where role = 'assistant'")
        assert reply["status"] == "completed"
        assert reply["content"] == 'You said: "a reply that takes a while"'
        [job] = await fetch(database_url, "select status from job_runs")
        assert job["status"] == "completed"
    finally:
        await app.state.services.close()
    assert sent[0]["type"] == "http.response.start"
