"""The Inngest serve endpoint: on any app (`handoff dev` mounts it beside the HTTP routes), or
as the whole app of the `inngest` Lambda."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import inngest
import inngest.fast_api
from fastapi import FastAPI
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agent.assistants import Assistants
from functions.cascade import create_cascade
from functions.erasure import create_erasure
from functions.outbox_relay import create_outbox_relay
from functions.retention import create_retention
from functions.tool_handoff import create_tool_handoff
from infra import telemetry
from infra.events import create_inngest_client
from infra.runtime import Services
from infra.settings import Settings
from turns.assistants import checked, load_checked

INNGEST_PATH = "/api/inngest"


def create_inngest_app(settings: Settings, *, assistants: Assistants | None = None) -> FastAPI:
    """The `inngest` Lambda's app: the serve endpoint alone, with no documentation routes.
    `assistants`: those ASSISTANTS names unless given; either way checked here, at start."""
    assistants = load_checked(settings) if assistants is None else checked(assistants, settings)
    app = FastAPI(title="Handoff functions", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.services = services = Services(settings)
    serve_functions(app, create_inngest_client(settings), services, assistants)
    return app


def serve_functions(
    app: FastAPI, client: inngest.Inngest, services: Services, assistants: Assistants
) -> list[inngest.Function[Any]]:
    """Serve the functions at INNGEST_PATH on `app`; the functions served."""
    app.add_middleware(
        FreshInngestSignature,
        path=INNGEST_PATH,
        enabled=not services.settings.inngest_is_dev_server,
    )
    app.add_middleware(FlushTelemetry)
    functions = [
        create_tool_handoff(client, services, assistants),
        create_outbox_relay(client, services),
        create_erasure(client, services),
        create_retention(client, services),
        create_cascade(client, services, assistants),
    ]
    # An unsigned PUT would sync the app at a URL taken from its Host header: only signed
    # syncs (the Inngest dashboard, its deploy integrations) may register the app.
    inngest.fast_api.serve(
        app, client, functions, serve_path=INNGEST_PATH, enable_unauthed_sync=False
    )
    return functions


SIGNATURE_MAX_AGE_S = 300


class FlushTelemetry:
    """Each step call's spans and metrics leave before its answer does: once Mangum returns
    it, Lambda may freeze the process until the next call, or for good."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http":
                await telemetry.flush_on_lambda()


class FreshInngestSignature:
    """401 for a call to the Inngest endpoint signed more than five minutes away from now.

    inngest-py 0.5 checks the signature's HMAC but not its timestamp, so a captured call could be
    replayed for ever. Inngest signs every attempt afresh, so honest calls are always fresh. A
    call without a signature passes through: the SDK refuses it itself (in production mode).
    """

    def __init__(self, app: ASGIApp, path: str, enabled: bool) -> None:
        self.app = app
        self.path = path
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.enabled and scope["type"] == "http" and scope["path"] == self.path:
            signature = dict(scope["headers"]).get(b"x-inngest-signature")
            if signature is not None and not _signed_recently(signature.decode("latin-1")):
                # The body the SDK gives every unauthorized call.
                response = JSONResponse({"message": "Unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _signed_recently(signature: str) -> bool:
    signed_at = urllib.parse.parse_qs(signature).get("t", [""])[0]
    return signed_at.isdigit() and abs(time.time() - int(signed_at)) <= SIGNATURE_MAX_AGE_S
