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
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from starlette.types import ASGIApp

from bench.floor import create_floor_app
from devkit.local_inngest import serve_asgi
from infra.entry_import import after_build
from infra.telemetry import setup_telemetry
from tests.fake_providers import serve_fake_providers
from tests.support import running_stack

IntakeWrapper = Callable[[ASGIApp], ASGIApp]
# Each bench's one user stands for the many users a deployment serves at once, whose turns the
# per-user limits would otherwise refuse.
NO_USER_LIMITS: dict[str, Any] = {
    "max_active_turns_per_user": 1_000_000,
    "max_turns_per_minute": 1_000_000,
    "max_chats_per_minute": 1_000_000,
}
# The fake providers' time to first token: a fast real model's.
PROVIDER_FIRST_CHUNK_MS = 200
ROOT = Path(__file__).resolve().parent.parent


async def create_chats(database_url: str, user_id: uuid.UUID, count: int) -> list[uuid.UUID]:
    """`count` chats of one user, in one round trip per chat on one connection."""
    chats = [uuid.uuid4() for _ in range(count)]
    await _insert_chats(database_url, [(chat, user_id) for chat in chats])
    return chats


async def create_owned_chats(database_url: str, count: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """`count` chats, each (chat, owner) of a user of its own: as a deployment's chats are, so
    that what the database keeps per user stays each user's size."""
    owned = [(uuid.uuid4(), uuid.uuid4()) for _ in range(count)]
    await _insert_chats(database_url, owned)
    return owned


async def _insert_chats(database_url: str, owned: list[tuple[uuid.UUID, uuid.UUID]]) -> None:
    connect = psycopg.AsyncConnection.connect(database_url, autocommit=True)
    async with await connect as conn, conn.cursor() as cur:
        await cur.executemany(
            "insert into auth.users (id, email) values (%s, %s) on conflict do nothing",
            [(user, f"{user}@bench") for user in dict.fromkeys(u for _, u in owned)],
        )
        await cur.executemany(
            "insert into public.chat (id, user_id, title) values (%s, %s, 'bench')", owned
        )


@asynccontextmanager
async def child_server(kind: str, database_url: str = "", **settings: str) -> AsyncIterator[str]:
    """`python -m bench.stack KIND` in a child process, the stack with `settings` on top of the
    tests' (`model`, say); yields its origin. Ends when we close its stdin (or kill it after a
    grace period)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.stack",
        kind,
        "--database-url",
        database_url,
        *[f"--set={name}={value}" for name, value in settings.items()],
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


async def _serve(kind: str, database_url: str, settings: dict[str, Any]) -> None:
    async def until_stdin_closes() -> None:
        await asyncio.to_thread(sys.stdin.read)

    if kind == "floor":
        async with serve_asgi(create_floor_app()) as origin:
            print(json.dumps({"origin": origin}), flush=True)
            await until_stdin_closes()
        return
    if kind == "providers":
        async with serve_fake_providers(PROVIDER_FIRST_CHUNK_MS) as fake:
            print(json.dumps({"origin": fake.origin}), flush=True)
            await until_stdin_closes()
        return
    # As the Lambda entries do: the SDK when the environment names an OTLP endpoint, and what
    # the app was built with frozen (infra/entry_import.py).
    setup_telemetry()
    async with running_stack(database_url, **{**NO_USER_LIMITS, **settings}) as stack:
        after_build()
        print(json.dumps({"origin": stack.origin}), flush=True)
        await until_stdin_closes()
        await stack.executor.wait_idle(timeout=60)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the Handoff stack or the floor.")
    parser.add_argument("kind", choices=["handoff", "floor", "providers"])
    parser.add_argument("--database-url", default="")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE, a setting")
    args = parser.parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.set)
    asyncio.run(_serve(args.kind, args.database_url, settings))


if __name__ == "__main__":
    main()
