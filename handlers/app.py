"""The HTTP app factory: respond, control, history, chats, health.

The Inngest serve endpoint is functions/app.py's; `handoff dev` mounts both on one app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from agent.assistants import Assistants
from handlers import assistants as assistant_routes
from handlers import branches, cascades, chats, control, history, members, respond, usage
from handlers.auth import Authenticator
from handlers.deps import provide
from handlers.errors import ErrorBody, install_error_handlers
from handlers.limits import BodySizeLimit
from handlers.shutdown import AnswerWhileStopping, settle_turns
from infra.events import LazyEventClient
from infra.runtime import Services
from infra.settings import Settings
from turns.assistants import checked, load_checked
from turns.streaming import TurnTasks


def create_app(
    settings: Settings | None = None,
    *,
    assistants: Assistants | None = None,
    docs: bool = True,
    unlimited_paths: frozenset[str] = frozenset(),
) -> FastAPI:
    """The user-facing app: everything the respond Lambda serves, and nothing that runs tools in
    the background (its cold start pays for every import). `docs`: serve the OpenAPI schema and
    its pages (development does; a deployed function has no use for them). `unlimited_paths`:
    endpoints mounted beside ours whose bodies the public body limit must not cut.
    `assistants`: those ASSISTANTS names, loaded and checked, unless given (checked the same
    way); a definition that cannot run raises AssistantDefinitionError here, at start."""
    settings = settings or Settings()
    assistants = load_checked(settings) if assistants is None else checked(assistants, settings)
    services = Services(settings)
    turns: TurnTasks = set()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # Let turns that are still persisting finish before the pool goes away (not for
        # longer than the database answers).
        await settle_turns(turns, services)
        # Whatever was added to the app (a change feed in development) ends before the pool.
        for hook in app.state.on_shutdown:
            await hook()
        await services.close()

    app = FastAPI(
        title="Handoff",
        version="0.1.0",
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    _document_error_body(app)
    provide(
        app,
        services=services,
        authenticator=Authenticator(settings),
        events=LazyEventClient(settings),
        assistants=assistants,
        turns=turns,
    )
    app.state.on_shutdown = []
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, exempt=unlimited_paths)
    # Outermost of ours: whatever is inside it may be cut short as the server stops.
    app.add_middleware(AnswerWhileStopping)
    _include_routes(app)
    return app


def _document_error_body(app: FastAPI) -> None:
    """ErrorBody's schema, which the routes' error responses name (handlers/errors.py), among
    the OpenAPI schema's components, made when the schema is."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schemas = generate().setdefault("components", {}).setdefault("schemas", {})
            body = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, definition in {**body.pop("$defs"), "ErrorBody": body}.items():
                schemas.setdefault(name, definition)
        return generate()  # the schema made above, kept by FastAPI

    app.openapi = openapi  # type: ignore[method-assign]


def _include_routes(app: FastAPI) -> None:
    # Each module's routes were built with it, each refusing query parameters it does not take
    # (the Inngest endpoint, mounted on this app in development, reads its own): they join the
    # app as they are. `include_router` would build every route again, on the app's first
    # request, which a cold start's readiness check then waits for.
    for router in (
        respond.router,
        assistant_routes.router,
        control.router,
        history.router,
        chats.router,
        branches.router,
        cascades.router,
        members.router,
        usage.router,
    ):
        app.router.routes.extend(router.routes)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}
