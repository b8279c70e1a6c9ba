"""The respond Lambda's SnapStart hooks, which the Lambda Web Adapter calls over HTTP.

The adapter runs the app as a process of its own, so the runtime's hooks cannot reach it: with
`AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH` and `AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH` set
(serverless.yml) it POSTs to those paths instead, before the snapshot and after each restore,
and fails that phase unless the answer is 2xx. It refuses those paths to every caller from
outside, and the routes exist only when the adapter names them. What each hook does:
infra/snapstart.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from fastapi import FastAPI, Request, Response

from handlers.auth import Authenticator
from handlers.deps import AssistantsDep, EventsDep, ServicesDep, TurnsDep, provide
from infra import snapstart
from infra.events import LazyEventClient
from turns.assistants import checked

BEFORE_CHECKPOINT = "AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH"
AFTER_RESTORE = "AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH"


def install_snapstart_hooks(app: FastAPI, environ: Mapping[str, str]) -> None:
    """Serve the hook paths the adapter's settings in `environ` name, if any."""
    hooks: dict[str, Callable[..., Awaitable[Response]]] = {
        BEFORE_CHECKPOINT: before_checkpoint,
        AFTER_RESTORE: after_restore,
    }
    for setting, hook in hooks.items():
        if path := environ.get(setting):
            app.add_api_route(
                path, hook, methods=["POST"], status_code=204, include_in_schema=False
            )


async def before_checkpoint(services: ServicesDep, events: EventsDep) -> Response:
    """Everything a first request would load is loaded (the assistants' graphs and models, the
    routes and their schemas were made with the app; the Inngest client is made here), and no
    connection is left open."""
    if isinstance(events, LazyEventClient):
        events.client()
    await snapstart.before_snapshot(services)
    return Response(status_code=204)


async def after_restore(
    request: Request,
    services: ServicesDep,
    assistants: AssistantsDep,
    turns: TurnsDep,
) -> Response:
    """`random` reseeded and the settings read again; when they changed, the app's objects are
    made anew from them (the pool, the token checks, the Inngest client, the assistants'
    graphs for new model options), as the app factory makes them."""
    settings = await asyncio.to_thread(snapstart.after_restore, services.settings)
    if settings is not None:
        await services.renew(settings)
        provide(
            request.app,
            services=services,
            authenticator=Authenticator(settings),
            events=LazyEventClient(settings),
            assistants=checked(assistants, settings),
            turns=turns,
        )
    return Response(status_code=204)
