"""The respond app's SnapStart hooks, in process: a restore after the settings changed."""

from __future__ import annotations

import random

import httpx
import pytest

from handlers.app import create_app
from handlers.snapstart import AFTER_RESTORE, BEFORE_CHECKPOINT, install_snapstart_hooks
from tests.databases import fresh_database
from tests.support import (
    JWT_SECRET,
    create_user_with_chat,
    fetch,
    parse_sse,
    settings_for,
    token_for,
)

HOOKS = {BEFORE_CHECKPOINT: "/hooks/before", AFTER_RESTORE: "/hooks/after"}


async def test_a_restore_serves_the_settings_rotated_since_the_snapshot(
    server_url: str, template_name: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the app built and snapshotted with one database, whose URL is then rotated: the
    # settings a restore reads (the environment here, SSM on AWS) name another database
    app = create_app(settings_for(database_url, "http://127.0.0.1:9"))
    install_snapstart_hooks(app, HOOKS)
    transport = httpx.ASGITransport(app=app)
    async with (
        fresh_database(server_url, template_name) as rotated_url,
        httpx.AsyncClient(transport=transport, base_url="http://adapter", timeout=30) as http,
    ):
        for name, value in {
            "DATABASE_URL": rotated_url,
            "SUPABASE_JWT_SECRET": JWT_SECRET,
            "SCRIPTED_TOKEN_DELAY_MS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("SSM_PARAMETER_PATH", raising=False)
        assert (await http.post("/hooks/before")).status_code == 204
        state_at_snapshot = random.getstate()

        # WHEN the copy is restored, then asked for a reply
        assert (await http.post("/hooks/after")).status_code == 204
        user_id, chat_id = await create_user_with_chat(rotated_url)
        response = await http.post(
            "/api/chat/respond",
            json={"chatId": str(chat_id), "content": "hello"},
            headers={"authorization": f"Bearer {token_for(user_id)}"},
        )

        # THEN `random` was reseeded, and the reply was stored in the database the settings
        # name now, not in the one the snapshot was built with
        assert random.getstate() != state_at_snapshot
        assert response.status_code == 200, response.text
        assert parse_sse(response.content)[-1][0] == "done"
        assert len(await fetch(rotated_url, "select id from public.message")) == 2
        assert await fetch(database_url, "select id from public.message") == []
        services = app.state.services
        await services.close()
