"""The Handoff stack for benchmarks: in this process, or in a child process of its own.

In-process is the tests' stack (the app under uvicorn plus the local executor) with one more
seam: a wrapper around the executor's event intake, so a bench can note when an event was
accepted. The child process serves the stack (or the floor) on its own interpreter, so a client
hammering it from the bench process does not share its event loop or its GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
from langchain_core.tools import BaseTool
from starlette.types import ASGIApp

from bench.floor import create_floor_app
from handlers.app import create_app
from infra.local_inngest import LocalInngest, loopback_socket, serve_asgi, socket_origin
from infra.settings import Settings
from tests.support import JWT_SECRET, Stack

IntakeWrapper = Callable[[ASGIApp], ASGIApp]
ROOT = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def bench_stack(
    database_url: str,
    *,
    tools: list[BaseTool] | None = None,
    wrap_intake: IntakeWrapper | None = None,
    **settings_overrides: Any,
) -> AsyncIterator[Stack]:
    """The real app under uvicorn and the local executor on loopback ports; zero-delay model."""
    intake_sock, app_sock = loopback_socket(), loopback_socket()
    signing_key = f"signkey-bench-{secrets.token_hex(32)}"
    event_key = secrets.token_hex(16)
    fields: dict[str, Any] = {
        "database_url": database_url,
        "supabase_jwt_secret": JWT_SECRET,
        "inngest_base_url": socket_origin(intake_sock),
        "inngest_signing_key": signing_key,
        "inngest_event_key": event_key,
        "scripted_token_delay_ms": 0,
    }
    settings = Settings.model_validate(fields | settings_overrides)
    app = create_app(settings, tools=tools)
    origin = socket_origin(app_sock)
    executor = LocalInngest(
        serve_url=f"{origin}/api/inngest",
        signing_key=signing_key,
        event_key=event_key,
        functions=app.state.inngest_functions,
        app_id=settings.inngest_app_id,
        schedules=False,
    )
    intake = wrap_intake(executor.intake) if wrap_intake else executor.intake
    async with (
        executor,
        serve_asgi(intake, intake_sock),
        serve_asgi(app, app_sock),
        httpx.AsyncClient(base_url=origin, timeout=60) as http,
    ):
        yield Stack(origin, app, settings, executor, http, database_url)


async def create_chats(database_url: str, user_id: uuid.UUID, count: int) -> list[uuid.UUID]:
    """`count` chats of one user, in one round trip per chat on one connection."""
    chats = [uuid.uuid4() for _ in range(count)]
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "insert into auth.users (id, email) values (%s, %s) on conflict do nothing",
            (user_id, f"{user_id}@bench"),
        )
        async with conn.cursor() as cur:
            await cur.executemany(
                "insert into public.chat (id, user_id, title) values (%s, %s, 'bench')",
                [(chat, user_id) for chat in chats],
            )
    return chats


@asynccontextmanager
async def child_server(kind: str, database_url: str = "") -> AsyncIterator[str]:
    """`python -m bench.stack KIND` in a child process; yields its origin. Ends when we close
    its stdin (or kill it after a grace period)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.stack",
        kind,
        "--database-url",
        database_url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(60):
            line = await proc.stdout.readline()
        if not line:
            raise RuntimeError(f"bench server {kind!r} exited with {await proc.wait()}")
        yield str(json.loads(line)["origin"])
    finally:
        proc.stdin.close()
        try:
            async with asyncio.timeout(15):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def _serve(kind: str, database_url: str) -> None:
    async def until_stdin_closes() -> None:
        await asyncio.to_thread(sys.stdin.read)

    if kind == "floor":
        async with serve_asgi(create_floor_app()) as origin:
            print(json.dumps({"origin": origin}), flush=True)
            await until_stdin_closes()
        return
    async with bench_stack(database_url) as stack:
        print(json.dumps({"origin": stack.origin}), flush=True)
        await until_stdin_closes()
        await stack.executor.wait_idle(timeout=60)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the Handoff stack or the floor.")
    parser.add_argument("kind", choices=["handoff", "floor"])
    parser.add_argument("--database-url", default="")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.kind, args.database_url))


if __name__ == "__main__":
    main()
