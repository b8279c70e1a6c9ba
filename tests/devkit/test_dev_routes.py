"""What `handoff dev` adds to the app: the chat page, the demo user's session, and a session as
another local user (`?as=<email>`), for trying a shared chat with two people on one machine."""

from __future__ import annotations

import posixpath
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import jwt
import pytest

from devkit.dev_routes import BAD_EMAIL, DevSession, install_dev_routes
from devkit.dev_server import DEMO_CHAT_ID, DEMO_EMAIL, DEMO_USER_ID, dev_anon_key, seed_demo
from handlers.app import create_app
from infra.settings import Settings
from tests.api import Api, ok
from tests.support import JWT_SECRET, fetch, in_process_app, token_for

USER, CHAT = uuid.uuid4(), uuid.uuid4()


def mint(user_id: uuid.UUID, email: str) -> str:
    return token_for(user_id, email=email)


def dev_app(database_url: str) -> httpx.ASGITransport:
    settings = Settings(database_url=database_url, supabase_jwt_secret=JWT_SECRET)
    app = create_app(settings)
    session = DevSession(USER, "demo@test", CHAT, mint, dev_anon_key(JWT_SECRET))
    install_dev_routes(app, session)
    return httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))


async def test_the_page_and_its_script_are_served(database_url: str) -> None:
    transport = dev_app(database_url)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        page = await http.get("/")
        script = await http.get("/dev/chat.js")
        vendored = await http.get("/dev/vendor/supabase.js")
        outside = await http.get("/dev/../cli.py")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/dev/chat.js"' in page.text
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    # supabase-js's browser build, served from the checkout (no build step, no CDN)
    assert '<script src="/dev/vendor/supabase.js"></script>' in page.text
    assert vendored.status_code == 200
    assert "javascript" in vendored.headers["content-type"]
    assert vendored.text.startswith("var supabase=")
    assert outside.status_code == 404


# `import … from './x.js'` and `import('./x.js')`: the modules a page module loads.
IMPORTED = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}/[^'"]+)['"]""")


async def test_every_module_the_page_imports_is_served_as_javascript(database_url: str) -> None:
    """The page's script is ES modules with no build step: each one that chat.js reaches, by
    relative import, must load in the browser, which runs a module only with a JavaScript
    type."""
    transport = dev_app(database_url)
    seen: dict[str, httpx.Response] = {}
    waiting = ["/dev/chat.js"]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        while waiting:
            path = waiting.pop()
            if path in seen:
                continue
            seen[path] = response = await http.get(path)
            for imported in IMPORTED.findall(response.text):
                waiting.append(
                    posixpath.normpath(posixpath.join(posixpath.dirname(path), imported))
                )
    # the dev session, the feed and the JavaScript client's build are among them, and every
    # module answers 200 with a JavaScript type
    assert "/dev/protocol/session.js" in seen
    assert "/dev/live.js" in seen
    assert {"/dev/client/index.js", "/dev/client/sse.js", "/dev/client/routes.js"} <= set(seen)
    assert {path: r.status_code for path, r in seen.items()} == dict.fromkeys(seen, 200)
    assert all("javascript" in r.headers["content-type"] for r in seen.values())


async def test_the_session_is_the_demo_users_and_only_for_this_machine(database_url: str) -> None:
    transport = dev_app(database_url)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        session = (await http.get("/api/dev/session")).json()
        transport.client = ("192.168.1.20", 50000)
        remote = await http.get("/api/dev/session")
    assert (session["userId"], session["chatId"]) == (str(USER), str(CHAT))
    claims = jwt.decode(
        session["token"], JWT_SECRET, algorithms=["HS256"], audience="authenticated"
    )
    assert claims["sub"] == str(USER)
    # AND the project's anon key, as supabase-js and supabase-py connect to Realtime with it
    anon = jwt.decode(session["anonKey"], JWT_SECRET, algorithms=["HS256"])
    assert (anon["role"], anon["iss"]) == ("anon", "supabase")
    assert remote.status_code == 404
    assert remote.json() == {"error": {"code": "not_found", "message": "Not Found"}}


@pytest.mark.parametrize(
    "host",
    [
        "localhost:8000",
        "127.0.0.1:8000",
        "[::1]:8000",
        "chat.localhost:8000",
        "LOCALHOST",
        "0.0.0.0:8000",
    ],
)
async def test_the_session_answers_a_page_of_this_machine_by_its_own_name(
    database_url: str, host: str
) -> None:
    async with httpx.AsyncClient(transport=dev_app(database_url), base_url="http://x") as http:
        answered = await http.get("/api/dev/session", headers={"Host": host})
    assert answered.status_code == 200, answered.text


@pytest.mark.parametrize(
    "host", ["attacker.example:8000", "attacker.example", "localhost.attacker.example", "10.0.0.2"]
)
async def test_the_session_is_refused_to_a_page_that_names_another_host(
    database_url: str, host: str
) -> None:
    # A site whose name resolves to 127.0.0.1 (DNS rebinding) reaches the server from this
    # machine, but its requests carry its own name.
    async with httpx.AsyncClient(transport=dev_app(database_url), base_url="http://x") as http:
        refused = await http.get("/api/dev/session", headers={"Host": host})
    assert refused.status_code == 404
    assert refused.json() == {"error": {"code": "not_found", "message": "Not Found"}}


@asynccontextmanager
async def dev_api(database_url: str) -> AsyncIterator[Api]:
    """The app with its lifespan and the dev routes, the demo user seeded as `handoff dev` seeds
    them, called from this machine by its loopback address."""
    await seed_demo(database_url)
    async with in_process_app(database_url) as api:
        session = DevSession(DEMO_USER_ID, DEMO_EMAIL, DEMO_CHAT_ID, mint, dev_anon_key(JWT_SECRET))
        install_dev_routes(api.app, session)
        transport = httpx.ASGITransport(app=api.app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
            yield Api(api.app, api.settings, http, database_url)


async def session_as(api: Api, email: str) -> dict[str, Any]:
    return ok(await api.http.get("/api/dev/session", params={"as": email}))


async def users(database_url: str) -> list[str]:
    return [
        r["email"] for r in await fetch(database_url, "select email from auth.users order by 1")
    ]


async def test_a_session_as_another_person_makes_them_once_with_a_chat_of_their_own(
    database_url: str,
) -> None:
    async with dev_api(database_url) as api:
        # WHEN the page asks for a session as bob, twice (the second in other letter cases)
        bob = await session_as(api, "bob@example.com")
        again = await session_as(api, "Bob@Example.COM")
        demo = ok(await api.http.get("/api/dev/session"))
        # THEN bob is a user of his own, with a token for him and a chat of his own
        assert bob["email"] == "bob@example.com"
        assert bob["userId"] != str(DEMO_USER_ID)
        claims = jwt.decode(
            bob["token"], JWT_SECRET, algorithms=["HS256"], audience="authenticated"
        )
        assert (claims["sub"], claims["email"]) == (bob["userId"], "bob@example.com")
        assert [c["id"] for c in await api.chats(bob["token"])] == [bob["chatId"]]
        # AND the same user and chat the second time: one row in auth.users, one chat
        assert (again["userId"], again["chatId"]) == (bob["userId"], bob["chatId"])
        assert await users(database_url) == ["bob@example.com", DEMO_EMAIL]
        # AND neither sees the other's chats
        assert str(DEMO_CHAT_ID) not in [c["id"] for c in await api.chats(bob["token"])]
        assert bob["chatId"] not in [c["id"] for c in await api.chats(demo["token"])]
        # AND asking as the demo user's e-mail is the demo user, with the demo chat
        as_demo = await session_as(api, DEMO_EMAIL)
        assert (as_demo["userId"], as_demo["chatId"]) == (str(DEMO_USER_ID), str(DEMO_CHAT_ID))


@pytest.mark.parametrize(
    "email", ["bob", "bob@", "@example.com", "bob smith@example.com", "bob@exa mple.com", ""]
)
async def test_a_session_as_something_that_is_no_email_is_refused(
    database_url: str, email: str
) -> None:
    async with dev_api(database_url) as api:
        refused = await api.http.get("/api/dev/session", params={"as": email})
    assert refused.status_code == 422
    assert refused.json() == {"error": {"code": "invalid_request", "message": BAD_EMAIL}}
    assert await users(database_url) == [DEMO_EMAIL]


async def test_a_session_as_another_person_is_only_for_this_machine(database_url: str) -> None:
    async with dev_api(database_url) as api:
        # From another machine, and from a page that names another host (DNS rebinding)
        elsewhere = httpx.ASGITransport(app=api.app, client=("192.168.1.20", 50000))
        async with httpx.AsyncClient(transport=elsewhere, base_url="http://127.0.0.1:8000") as http:
            remote = await http.get("/api/dev/session", params={"as": "bob@example.com"})
        rebound = await api.http.get(
            "/api/dev/session",
            params={"as": "bob@example.com"},
            headers={"Host": "attacker.example:8000"},
        )
        # (a bad e-mail from elsewhere learns no more than a good one)
        remote_bad = await api.http.get(
            "/api/dev/session", params={"as": "bob"}, headers={"Host": "attacker.example"}
        )
    for response in (remote, rebound, remote_bad):
        assert response.status_code == 404
        assert response.json() == {"error": {"code": "not_found", "message": "Not Found"}}
    assert await users(database_url) == [DEMO_EMAIL]


async def test_the_demo_user_shares_a_chat_with_a_second_local_person(database_url: str) -> None:
    async with dev_api(database_url) as api:
        demo = ok(await api.http.get("/api/dev/session"))
        # GIVEN bob has signed in once (the page opened as ?as=bob@example.com)
        bob = await session_as(api, "bob@example.com")
        # WHEN the demo user adds him to the demo chat by his e-mail
        added = await api.add_member(demo["token"], DEMO_CHAT_ID, email="bob@example.com")
        assert ok(added, 201)["userId"] == bob["userId"]
        # THEN bob's session sees it among his chats, as a member, beside his own
        bobs = {c["id"]: c["role"] for c in await api.chats(bob["token"])}
        assert bobs == {str(DEMO_CHAT_ID): "member", bob["chatId"]: "owner"}
        # AND a new session of his (a reload) still does
        reloaded = await session_as(api, "bob@example.com")
        assert str(DEMO_CHAT_ID) in [c["id"] for c in await api.chats(reloaded["token"])]
