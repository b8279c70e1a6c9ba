"""Small inngest functions served by a real FastAPI app and driven by the local executor."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import fastapi
import inngest
import inngest.fast_api

from devkit.local_inngest import (
    Limits,
    LocalInngest,
    loopback_socket,
    serve_asgi_together,
    socket_origin,
)

SERVE_PATH = "/api/inngest"


@dataclass(frozen=True)
class Served:
    client: inngest.Inngest
    local: LocalInngest
    intake_origin: str
    serve_url: str
    signing_key: str
    event_key: str


@asynccontextmanager
async def served_functions(
    app_id: str,
    build: Callable[[inngest.Inngest], list[inngest.Function[Any]]],
    *,
    retry_backoff: Sequence[float],
    limits: Limits | None = None,
) -> AsyncIterator[Served]:
    """The functions `build` makes on a signed production client, served and driven locally.

    Schedules are off: a cron firing mid-test would add runs; tests fire cron functions.
    """
    signing_key = "signkey-test-" + secrets.token_hex(32)
    event_key = secrets.token_hex(16)
    intake_sock, app_sock = loopback_socket(), loopback_socket()
    client = inngest.Inngest(
        app_id=app_id,
        is_production=True,
        signing_key=signing_key,
        event_key=event_key,
        event_api_base_url=socket_origin(intake_sock),
    )
    functions = build(client)
    app = fastapi.FastAPI()
    inngest.fast_api.serve(app, client, functions, serve_path=SERVE_PATH)
    serve_url = socket_origin(app_sock) + SERVE_PATH
    local = LocalInngest(
        serve_url=serve_url,
        signing_key=signing_key,
        event_key=event_key,
        functions=functions,
        app_id=app_id,
        retry_backoff=retry_backoff,
        schedules=False,
        limits=limits,
    )
    async with (
        local,
        serve_asgi_together((local.intake, intake_sock), (app, app_sock)) as (intake_origin, _),
    ):
        yield Served(client, local, intake_origin, serve_url, signing_key, event_key)
