"""`handoff dev`: the whole stack on this machine, with the chat page and a demo user."""

from __future__ import annotations

import asyncio
import logging
import secrets
import shlex
import socket
import sys
import time
import uuid

import jwt

from devkit.app import create_dev_app
from devkit.change_feed import WAL_LEVEL_SQL
from devkit.dev_routes import DevSession, install_dev_routes
from devkit.embedded_pg import start_embedded_postgres
from devkit.local_inngest import LocalInngest, loopback_socket, serve_asgi, socket_origin
from infra.db import connect
from infra.migrate import migrate
from infra.settings import Settings
from infra.store import chats
from infra.store.ids import ChatId, UserId

logger = logging.getLogger(__name__)

DEMO_USER_ID = UserId(uuid.UUID("00000000-0000-4000-8000-00000000d3e0"))
DEMO_CHAT_ID = ChatId(uuid.UUID("00000000-0000-4000-8000-00000000c4a7"))
DEMO_EMAIL = "demo@handoff.local"
DEV_TOKEN_TTL_SECONDS = 24 * 3600


def mint_dev_token(secret: str, user_id: UserId, audience: str) -> str:
    now = int(time.time())
    claims = {
        "sub": str(user_id),
        "aud": audience,
        "role": "authenticated",
        "email": DEMO_EMAIL,
        "iat": now,
        "exp": now + DEV_TOKEN_TTL_SECONDS,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


async def seed_demo(database_url: str) -> None:
    async with await connect(database_url) as conn, conn.transaction():
        await chats.ensure_user(conn, DEMO_USER_ID, DEMO_EMAIL)
        claims = {"sub": str(DEMO_USER_ID), "role": "authenticated"}
        await chats.create_chat(conn, claims, title="Demo chat", chat_id=DEMO_CHAT_ID)


async def warn_without_logical_decoding(database_url: str) -> None:
    async with await connect(database_url) as conn:
        row = await (await conn.execute(WAL_LEVEL_SQL)).fetchone()
    if row is not None and row["wal_level"] != "logical":
        print(
            f"Note: this Postgres runs with wal_level={row['wal_level']}, so the chat page cannot"
            " follow background work live and `handoff chat` polls instead. For live progress:"
            " ALTER SYSTEM SET wal_level = logical, then restart Postgres.",
            flush=True,
        )


async def dev_server(settings: Settings, host: str, port: int) -> None:
    updates: dict[str, object] = {}
    if not settings.database_url:
        print("DATABASE_URL not set: starting an embedded Postgres…", flush=True)
        updates["database_url"] = await asyncio.to_thread(start_embedded_postgres)
    if settings.supabase_jwt_secret is None:
        updates["supabase_jwt_secret"] = secrets.token_urlsafe(32)
    local_engine = not (
        settings.inngest_is_dev_server or settings.inngest_origin or settings.inngest_signing_key
    )
    intake_sock = loopback_socket(host) if local_engine else None
    if intake_sock is not None:
        updates |= {
            "inngest_base_url": socket_origin(intake_sock),
            "inngest_signing_key": f"signkey-local-{secrets.token_hex(32)}",
            "inngest_event_key": secrets.token_hex(16),
        }
    settings = Settings.model_validate({**settings.model_dump(), **updates})
    assert settings.database_url
    assert settings.supabase_jwt_secret
    applied = await migrate(settings.database_url)
    print(f"migrations: {len(applied)} applied", flush=True)
    await seed_demo(settings.database_url)
    await warn_without_logical_decoding(settings.database_url)

    app = create_dev_app(settings)
    secret = settings.supabase_jwt_secret.get_secret_value()

    def mint() -> str:
        return mint_dev_token(secret, DEMO_USER_ID, settings.jwt_audience)

    install_dev_routes(app, DevSession(DEMO_USER_ID, DEMO_EMAIL, DEMO_CHAT_ID, mint))
    app_sock = loopback_socket(host) if port == 0 else _bound_socket(host, port)
    origin = socket_origin(app_sock)
    token = mint()
    if intake_sock is None:
        async with serve_asgi(app, app_sock):
            _print_ready(
                origin, token, "Inngest at " + (settings.inngest_origin or "Inngest Cloud")
            )
            await asyncio.Event().wait()
        return
    assert settings.inngest_signing_key
    assert settings.inngest_event_key
    executor = LocalInngest(
        serve_url=f"{origin}/api/inngest",
        signing_key=settings.inngest_signing_key.get_secret_value(),
        event_key=settings.inngest_event_key.get_secret_value(),
        functions=app.state.inngest_functions,
        app_id=settings.inngest_app_id,
    )
    async with executor, executor.serve_intake(intake_sock), serve_asgi(app, app_sock):
        _print_ready(origin, token, "local executor (development only)")
        await asyncio.Event().wait()


def _bound_socket(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP so asyncio disables Nagle on accepted connections (see loopback_socket).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def _print_ready(origin: str, token: str, engine: str) -> None:
    body = f'{{"chatId": "{DEMO_CHAT_ID}", "content": "/calc 2*21"}}'
    curl = (
        f"curl -N -X POST {origin}/api/chat/respond \\\n"
        f"  -H 'Authorization: Bearer {token}' \\\n"
        f"  -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(body)}"
    )
    print(f"\nHandoff is running at {origin} (background work: {engine}).", flush=True)
    print(f"Chat page: {origin}/", flush=True)
    print(f'In a terminal: handoff chat --url {origin} "/sleep 2"', flush=True)
    print(f"Demo user {DEMO_EMAIL}, chat {DEMO_CHAT_ID}. Or:\n\n{curl}\n", flush=True)
    sys.stdout.flush()
