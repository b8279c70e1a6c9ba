"""Test helpers: users, chats, tokens, the app in-process or as a running stack (its client is
tests/api.py)."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx
import jwt
import psycopg
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from mypy_boto3_s3 import S3Client
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from starlette.types import ASGIApp

from agent.assistants import Assistants
from agent.threads import thread_config, thread_key
from demo.assistants import ASSISTANTS as DEMO_ASSISTANTS
from devkit.app import create_dev_app
from devkit.local_inngest import (
    LocalInngest,
    loopback_socket,
    serve_asgi_together,
    socket_origin,
)
from devkit.local_inngest.runs import RunRecord
from infra.db import connect
from infra.settings import Settings
from infra.store.checkpoints import durable_saver
from tests.api import Api as Api  # the client, where the tests have always found it
from tests.api import parse_sse as parse_sse

JWT_SECRET = "test-secret-" + "x" * 32
# The bucket of large tool outputs in moto's S3 (the `s3` fixture of tests/conftest.py).
TOOL_OUTPUT_BUCKET = "handoff-tool-outputs-test"


def stored_objects(s3: S3Client) -> dict[str, bytes]:
    """Every object in TOOL_OUTPUT_BUCKET, by key."""
    listing = s3.list_objects_v2(Bucket=TOOL_OUTPUT_BUCKET).get("Contents", [])
    return {
        o["Key"]: s3.get_object(Bucket=TOOL_OUTPUT_BUCKET, Key=o["Key"])["Body"].read()
        for o in listing
    }


# Every committed write to message_draft is one Realtime event per subscriber: count them.
DRAFT_LOG_SQL = """
create table draft_write_log (
  at timestamptz not null default clock_timestamp(),
  seq bigint not null,
  draft_content text not null
);
create function log_draft_write() returns trigger language plpgsql as $$
begin
  insert into draft_write_log (seq, draft_content) values (new.seq, new.draft_content);
  return new;
end
$$;
create trigger draft_write_log after insert or update on public.message_draft
  for each row execute function log_draft_write();
"""


# Every draft write fails while `database_outage` has a row: a model round cannot be stored.
OUTAGE_SQL = """
create table database_outage (since timestamptz not null default now());
create function refuse_while_down() returns trigger language plpgsql as $$
begin
  if exists (select 1 from database_outage) then
    raise exception 'the database refuses this write';
  end if;
  return new;
end $$;
create trigger refuse_while_down before insert or update on public.message_draft
  for each row execute function refuse_while_down();
"""


def token_for(user_id: uuid.UUID, *, secret: str = JWT_SECRET, **overrides: Any) -> str:
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": str(user_id),
        "aud": "authenticated",
        "role": "authenticated",
        "iat": now,
        "exp": now + 600,
        **overrides,
    }
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, secret, "HS256")


async def create_user_with_chat(
    database_url: str, *, chat_id: uuid.UUID | None = None, assistants: Sequence[str] = ()
) -> tuple[uuid.UUID, uuid.UUID]:
    """A user and their chat; `assistants` take part in it, the first the chat's default (none:
    the deployment's default alone)."""
    user_id, chat_id = uuid.uuid4(), chat_id or uuid.uuid4()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "insert into auth.users (id, email) values (%s, %s)", (user_id, f"{user_id}@test")
        )
        await conn.execute(
            "insert into public.chat (id, user_id, title) values (%s, %s, 'test')",
            (chat_id, user_id),
        )
        for i, assistant_id in enumerate(assistants):
            await conn.execute(
                "insert into public.chat_assistant (chat_id, assistant_id, is_default)"
                " values (%s, %s, %s)",
                (chat_id, assistant_id, i == 0),
            )
    return user_id, chat_id


async def fetch(database_url: str, query: str, *params: Any) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        return await (await conn.execute(query, params)).fetchall()


async def execute(database_url: str, query: str, *params: Any) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(query, params)


async def insert_message(
    database_url: str, chat_id: uuid.UUID, content: str = "hello", **metadata: Any
) -> uuid.UUID:
    """A streaming assistant message, written as the service writes (no RLS)."""
    message_id = uuid.uuid4()
    await execute(
        database_url,
        "insert into public.message (id, chat_id, role, content, status, metadata)"
        " values (%s, %s, 'assistant', %s, 'streaming', %s)",
        message_id,
        chat_id,
        content,
        Jsonb(metadata),
    )
    return message_id


async def write_draft(
    database_url: str, message_id: uuid.UUID, chat_id: uuid.UUID, text: str, seq: int
) -> None:
    await execute(
        database_url,
        "insert into public.message_draft (message_id, chat_id, draft_content, seq)"
        " values (%s, %s, %s, %s) on conflict (message_id) do update"
        " set draft_content = excluded.draft_content, seq = excluded.seq",
        message_id,
        chat_id,
        text,
        seq,
    )


async def wait_for_row(database_url: str, query: str, *params: Any) -> dict[str, Any]:
    """The first row of `query` once it has one (within 20 s)."""
    async with asyncio.timeout(20):
        # Polls: the rows come from other connections' commits, which signal nothing here.
        while not (rows := await fetch(database_url, query, *params)):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    return rows[0]


async def durable_messages(
    database_url: str, chat_id: uuid.UUID, assistant: str = "default"
) -> list[BaseMessage]:
    """The messages of the thread's latest durable checkpoint ([] for a new thread)."""
    async with await connect(database_url) as conn:
        latest = await durable_saver(conn).aget_tuple(thread_config(thread_key(chat_id, assistant)))
    return list(latest.checkpoint["channel_values"]["messages"]) if latest else []


async def sit_out_waits(executor: LocalInngest) -> int:
    """Time every wait out until no run waits any more, as if the whole time a job waits for
    the user passed (functions/wakes.py: that is several waits in a row); how many there were."""
    count = 0
    while executor.waiting():
        count += executor.expire_waits()
        await executor.wait_idle()
    return count


@dataclass
class Stack(Api):
    origin: str
    executor: LocalInngest

    def handoff_run(self) -> RunRecord:
        """The one `tool-handoff` run the executor made."""
        [run] = [r for r in self.executor.runs() if r.function_id.endswith("tool-handoff")]
        return run


def helper_with(tools: list[BaseTool]) -> Assistants:
    """The demo's assistants, the default one (its helper) with `tools` instead of its own."""
    helper, *others = DEMO_ASSISTANTS
    return Assistants([replace(helper, tools=tools), *others])


def settings_for(database_url: str, inngest_origin: str, **overrides: Any) -> Settings:
    fields: dict[str, Any] = {
        "database_url": database_url,
        "supabase_jwt_secret": JWT_SECRET,
        "inngest_base_url": inngest_origin,
        "inngest_signing_key": f"signkey-test-{secrets.token_hex(32)}",
        "inngest_event_key": secrets.token_hex(16),
        "scripted_token_delay_ms": 0,
    }
    return Settings.model_validate(fields | overrides)


@asynccontextmanager
async def in_process_app(
    database_url: str, *, assistants: Assistants | None = None, **settings_overrides: Any
) -> AsyncIterator[Api]:
    """The real app in this process through httpx's ASGI transport, its lifespan included, for
    tests that need only HTTP: no server, no executor, no websocket (0.06 s against about 0.5 s
    for a running stack). Inngest is a port nobody listens on, so a test that sends an event
    belongs on `running_stack` and fails loudly here. `assistants` as `running_stack`'s."""
    closed = loopback_socket()
    settings = settings_for(database_url, socket_origin(closed), **settings_overrides)
    closed.close()
    app = create_dev_app(settings, assistants=assistants)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=30) as http,
    ):
        yield Api(app, settings, http, database_url)


@asynccontextmanager
async def running_stack(
    database_url: str,
    *,
    assistants: Assistants | None = None,
    wrap_intake: Callable[[ASGIApp], ASGIApp] | None = None,
    **settings_overrides: Any,
) -> AsyncIterator[Stack]:
    """The real app under uvicorn plus the local Inngest executor, on loopback ports.

    `assistants`: the deployment's (ASSISTANTS' by default: the demo's; `helper_with` gives
    its default assistant other tools). `wrap_intake` wraps the executor's event intake (a
    bench times when events arrive)."""
    intake_sock, app_sock = loopback_socket(), loopback_socket()
    settings = settings_for(database_url, socket_origin(intake_sock), **settings_overrides)
    assert settings.inngest_signing_key is not None
    assert settings.inngest_event_key is not None
    signing_key = settings.inngest_signing_key.get_secret_value()
    event_key = settings.inngest_event_key.get_secret_value()
    app = create_dev_app(settings, assistants=assistants)
    origin = socket_origin(app_sock)
    executor = LocalInngest(
        serve_url=f"{origin}/api/inngest",
        signing_key=signing_key,
        event_key=event_key,
        functions=app.state.inngest_functions,
        app_id=settings.inngest_app_id,
        retry_backoff=(0.01, 0.05, 0.1),
        # Cron functions (the outbox relay) run when a test fires them, not on the clock.
        schedules=False,
    )
    intake = wrap_intake(executor.intake) if wrap_intake else executor.intake
    async with (
        executor,
        serve_asgi_together((intake, intake_sock), (app, app_sock)),
        httpx.AsyncClient(base_url=origin, timeout=30) as http,
    ):
        yield Stack(app, settings, http, database_url, origin, executor)
