"""`handoff dev`: the whole stack on this machine, with the chat page and a demo user."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import jwt
from fastapi import FastAPI

from agent.assistants import Assistants
from devkit.app import create_dev_app
from devkit.change_feed import WAL_LEVEL_SQL
from devkit.changes import close_change_feed
from devkit.dev_banner import print_ready
from devkit.dev_home import DevHome
from devkit.dev_logs import RequestLog, quiet_stop
from devkit.dev_routes import DevSession, install_dev_routes
from devkit.dev_socket import PortUnavailable, listening_socket
from devkit.embedded_pg import start_embedded_postgres
from devkit.left_behind import dev_server_presence, jobs_left_behind
from devkit.local_inngest import LocalInngest, loopback_socket, serve_asgi, socket_origin
from devkit.timeline import Timeline
from infra.db import connect
from infra.events import HANDOFF_EVENT
from infra.migrate import applied_text, migrate
from infra.settings import Settings
from infra.store import chats
from infra.store.access import Claims
from infra.store.ids import ChatId, UserId
from infra.telemetry import setup_telemetry

logger = logging.getLogger(__name__)

DEMO_USER_ID = UserId(uuid.UUID("00000000-0000-4000-8000-00000000d3e0"))
DEMO_CHAT_ID = ChatId(uuid.UUID("00000000-0000-4000-8000-00000000c4a7"))
DEMO_EMAIL = "demo@handoff.local"
DEV_TOKEN_TTL_SECONDS = 24 * 3600
ANON_KEY_ISSUED = 1_767_225_600  # 2026-01-01: fixed, so that a secret always signs one key
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def mint_dev_token(secret: str, user_id: uuid.UUID, audience: str, email: str = DEMO_EMAIL) -> str:
    now = int(time.time())
    claims = {
        "sub": str(user_id),
        "aud": audience,
        "role": "authenticated",
        "email": email,
        "iat": now,
        "exp": now + DEV_TOKEN_TTL_SECONDS,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def dev_anon_key(secret: str) -> str:
    """The project's anon key, as Supabase makes one (a JWT with role `anon`, valid for ten
    years), signed with the dev server's secret: the same key for as long as the secret lasts."""
    claims = {"iss": "supabase", "ref": "handoff-dev", "role": "anon", "iat": ANON_KEY_ISSUED}
    claims["exp"] = ANON_KEY_ISSUED + 10 * 365 * 24 * 3600
    return jwt.encode(claims, secret, algorithm="HS256")


async def seed_demo(database_url: str) -> None:
    async with await connect(database_url) as conn, conn.transaction():
        await chats.ensure_user(conn, DEMO_USER_ID, DEMO_EMAIL)
        claims: Claims = {"sub": str(DEMO_USER_ID), "role": "authenticated"}
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


def run(settings: Settings, host: str, port: int, home: DevHome, assistants: Assistants) -> int:
    """`handoff dev` until Ctrl-C, SIGTERM or SIGHUP, which all stop it the same way: runs and
    requests end, the embedded Postgres stops when no other dev server uses it. The exit code.
    `assistants`: those ASSISTANTS names, loaded and checked."""
    try:
        app_sock = listening_socket(host, port)
    except PortUnavailable as exc:
        print(f"handoff dev: {exc}.", file=sys.stderr)
        return 1
    with contextlib.suppress(KeyboardInterrupt):  # one before the handlers were in place
        asyncio.run(_until_stopped(settings, app_sock, home, assistants))
    return 0


@dataclass
class StopRequest:
    """Set by a stop signal. While the server starts, the signal cancels the start instead."""

    requested: asyncio.Event = field(default_factory=asyncio.Event)
    serving: bool = False

    async def wait(self) -> None:
        self.serving = True
        await self.requested.wait()


async def _until_stopped(
    settings: Settings, app_sock: socket.socket, home: DevHome, assistants: Assistants
) -> None:
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    stop = StopRequest()
    received: list[signal.Signals] = []

    def on_signal(signum: signal.Signals) -> None:
        received.append(signum)
        if len(received) == 1:
            _say(f"\nStopping ({signum.name})…")
        elif len(received) == 2:
            # The stop takes seconds at most (uvicorn's grace period, turns storing their
            # reply); cutting it short would leave what it stops half done.
            _say("Still stopping…")
        stop.requested.set()
        if not stop.serving:
            main.cancel()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await dev_server(settings, app_sock, home, stop, assistants)
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
    _say("handoff dev stopped.")


def _say(text: str) -> None:
    # After SIGHUP the terminal may be gone: nothing to print to is no reason to fail.
    with contextlib.suppress(OSError):
        print(text, flush=True)


async def dev_server(
    settings: Settings,
    app_sock: socket.socket,
    home: DevHome,
    stop: StopRequest,
    assistants: Assistants,
) -> None:
    """The whole stack on `app_sock`, until `stop` is requested."""
    settings, intake_sock = await _dev_settings(settings, home, app_sock.getsockname()[0])
    assert settings.database_url
    assert settings.supabase_jwt_secret
    applied = await migrate(settings.database_url, assistants)
    print(f"migrations: {applied_text(applied)}", flush=True)
    await seed_demo(settings.database_url)
    await warn_without_logical_decoding(settings.database_url)

    # The page's timelines: the turns' spans in memory (exported over OTLP as well when the
    # OTEL_* variables name an endpoint).
    traces = Timeline()
    setup_telemetry(traces)
    app = create_dev_app(settings, assistants=assistants)
    stopping = asyncio.Event()
    app.add_middleware(RequestLog, stopping=stopping)
    quiet_stop()
    secret = settings.supabase_jwt_secret.get_secret_value()

    def mint(user_id: uuid.UUID = DEMO_USER_ID, email: str = DEMO_EMAIL) -> str:
        return mint_dev_token(secret, user_id, settings.jwt_audience, email)

    session = DevSession(DEMO_USER_ID, DEMO_EMAIL, DEMO_CHAT_ID, mint, dev_anon_key(secret))
    install_dev_routes(app, session, traces)
    origin = socket_origin(app_sock)
    banner = functools.partial(
        print_ready,
        origin,
        mint(),
        email=DEMO_EMAIL,
        chat_id=DEMO_CHAT_ID,
        starters=assistants.default.starters,
    )
    if intake_sock is not None:
        serving = Serving(app, app_sock, origin, banner, stop, stopping)
        await _serve_with_executor(serving, settings, intake_sock)
        return
    async with serve_asgi(app, app_sock):
        banner("Inngest at " + (settings.inngest_origin or "Inngest Cloud"))
        try:
            await stop.wait()
        finally:
            stopping.set()
            await close_change_feed(app)


async def _dev_settings(
    settings: Settings, home: DevHome, host: str
) -> tuple[Settings, socket.socket | None]:
    """The settings completed for development (an embedded Postgres, the home's JWT secret, the
    local executor's keys when no Inngest is named), and the executor's intake socket if so."""
    updates: dict[str, object] = {}
    if not settings.database_url:
        print("DATABASE_URL not set: starting an embedded Postgres…", flush=True)
        updates["database_url"] = await asyncio.to_thread(start_embedded_postgres, home.postgres)
    if settings.supabase_jwt_secret is None:
        updates["supabase_jwt_secret"] = home.jwt_secret()
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
    return Settings.model_validate({**settings.model_dump(), **updates}), intake_sock


@dataclass(frozen=True)
class Serving:
    """The dev app, its socket and the banner to show, given the background's engine, until
    `stop` is requested (`stopping` tells the request log)."""

    app: FastAPI
    app_sock: socket.socket
    origin: str
    banner: Callable[[str], None]
    stop: StopRequest
    stopping: asyncio.Event


async def _serve_with_executor(
    serving: Serving, settings: Settings, intake_sock: socket.socket
) -> None:
    """Serve the app with the local executor, resuming the jobs the last dev server left."""
    assert settings.database_url
    assert settings.inngest_signing_key
    assert settings.inngest_event_key
    app = serving.app
    executor = LocalInngest(
        serve_url=f"{serving.origin}/api/inngest",
        signing_key=settings.inngest_signing_key.get_secret_value(),
        event_key=settings.inngest_event_key.get_secret_value(),
        functions=app.state.inngest_functions,
        app_id=settings.inngest_app_id,
    )
    async with dev_server_presence(settings.database_url) as alone:
        pool = await app.state.services.pool()
        left = await jobs_left_behind(pool) if alone else []
        if left:
            print(f"Resuming {_jobs(len(left))} the last handoff dev left unfinished.", flush=True)
        elif not alone:
            print(
                "Another handoff dev serves this database: the background jobs it runs are"
                " left to it.",
                flush=True,
            )
        async with executor, executor.serve_intake(intake_sock), serve_asgi(app, serving.app_sock):
            for job in left:
                executor.send(
                    {"id": job.idempotency_key, "name": HANDOFF_EVENT, "data": job.payload}
                )
            serving.banner("local executor (development only)")
            try:
                await serving.stop.wait()
            finally:
                serving.stopping.set()
                # Runs first: no step starts while the app shuts down. A run cut short leaves
                # its job unfinished, for the next start to resume.
                await executor.stop()
                await close_change_feed(app)


def _jobs(count: int) -> str:
    return "1 background job" if count == 1 else f"{count} background jobs"
