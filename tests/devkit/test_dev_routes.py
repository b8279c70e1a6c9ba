"""What `handoff dev` adds to the app: the chat page and the demo user's session."""

from __future__ import annotations

import uuid

import httpx
import jwt

from devkit.dev_routes import DevSession, install_dev_routes
from handlers.app import create_app
from infra.settings import Settings
from tests.support import JWT_SECRET, token_for

USER, CHAT = uuid.uuid4(), uuid.uuid4()


def dev_app(database_url: str) -> httpx.ASGITransport:
    settings = Settings(database_url=database_url, supabase_jwt_secret=JWT_SECRET)
    app = create_app(settings)
    install_dev_routes(app, DevSession(USER, "demo@test", CHAT, lambda: token_for(USER)))
    return httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))


async def test_the_page_and_its_script_are_served(database_url: str) -> None:
    async with httpx.AsyncClient(transport=dev_app(database_url), base_url="http://dev") as http:
        page = await http.get("/")
        script = await http.get("/dev/chat.js")
        outside = await http.get("/dev/../cli.py")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/dev/chat.js"' in page.text
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert outside.status_code == 404


async def test_the_session_is_the_demo_users_and_only_for_this_machine(database_url: str) -> None:
    transport = dev_app(database_url)
    async with httpx.AsyncClient(transport=transport, base_url="http://dev") as http:
        session = (await http.get("/api/dev/session")).json()
        transport.client = ("192.168.1.20", 50000)
        remote = await http.get("/api/dev/session")
    assert (session["userId"], session["chatId"]) == (str(USER), str(CHAT))
    claims = jwt.decode(
        session["token"], JWT_SECRET, algorithms=["HS256"], audience="authenticated"
    )
    assert claims["sub"] == str(USER)
    assert remote.status_code == 404
    assert remote.json() == {"error": {"code": "not_found", "message": "Not Found"}}
