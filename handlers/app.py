"""The app factory: the respond route, health, and the Inngest serve endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import inngest
from fastapi import FastAPI
from langchain_core.tools import BaseTool

from agent.tools import demo_tools
from functions.client import create_inngest_client
from handlers import chats, control, history, respond
from handlers.auth import Authenticator
from handlers.errors import install_error_handlers
from handlers.limits import BodySizeLimit, FreshInngestSignature
from infra.runtime import Services
from infra.settings import Settings

INNGEST_PATH = "/api/inngest"


def create_app(
    settings: Settings | None = None,
    *,
    tools: list[BaseTool] | None = None,
    serve_inngest: bool = True,
) -> FastAPI:
    """The whole app; with `serve_inngest=False`, only what the quick path needs (the respond
    Lambda, whose cold start pays for every import)."""
    settings = settings or Settings()
    services = Services(settings)
    tools = tools if tools is not None else demo_tools()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # Let turns that are still persisting finish before the pool goes away.
        if app.state.turns:
            await asyncio.wait(app.state.turns, timeout=30)
        # `handoff dev`'s change feed releases its replication slot before the pool goes.
        if (feed := getattr(app.state, "change_feed", None)) is not None:
            await feed.close()
        await services.close()

    app = FastAPI(title="Handoff", version="0.1.0", lifespan=lifespan)
    client = create_inngest_client(settings)
    app.state.services = services
    app.state.authenticator = Authenticator(settings)
    app.state.events = client
    app.state.tools = tools
    app.state.turns = set()
    app.state.inngest_functions = []
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.include_router(respond.router)
    app.include_router(control.router)
    app.include_router(history.router)
    app.include_router(chats.router)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    if serve_inngest:
        _serve_inngest(app, client, services, tools)
    return app


def _serve_inngest(
    app: FastAPI, client: inngest.Inngest, services: Services, tools: list[BaseTool]
) -> None:
    # Imported here, not at the top, so the respond Lambda never loads the function code.
    import inngest.fast_api

    from functions.outbox_relay import create_outbox_relay
    from functions.tool_handoff import create_tool_handoff

    app.add_middleware(
        FreshInngestSignature,
        path=INNGEST_PATH,
        enabled=not services.settings.inngest_is_dev_server,
    )
    functions = [
        create_tool_handoff(client, services, tools),
        create_outbox_relay(client, services),
    ]
    app.state.inngest_functions = functions
    # An unsigned PUT would sync the app at a URL taken from its Host header: only signed
    # syncs (the Inngest dashboard, its deploy integrations) may register the app.
    inngest.fast_api.serve(
        app, client, functions, serve_path=INNGEST_PATH, enable_unauthed_sync=False
    )
