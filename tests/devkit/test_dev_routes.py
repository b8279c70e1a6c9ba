"""What `handoff dev` adds to the app: the chat page and the demo user's session."""

from __future__ import annotations

import posixpath
import re
import uuid

import httpx
import jwt
import pytest

from devkit.dev_routes import DevSession, install_dev_routes
from devkit.dev_server import dev_anon_key
from handlers.app import create_app
from infra.settings import Settings
from tests.support import JWT_SECRET, token_for

USER, CHAT = uuid.uuid4(), uuid.uuid4()


def dev_app(database_url: str) -> httpx.ASGITransport:
    settings = Settings(database_url=database_url, supabase_jwt_secret=JWT_SECRET)
    app = create_app(settings)
    session = DevSession(USER, "demo@test", CHAT, lambda: token_for(USER), dev_anon_key(JWT_SECRET))
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
