"""The app `handoff dev`, the tests and the benchmarks run: the HTTP routes and the Inngest
serve endpoint on one server, as the two Lambdas serve them apart, and Supabase Realtime's
websocket in place of Realtime."""

from __future__ import annotations

from fastapi import FastAPI

from agent.assistants import Assistants
from devkit.realtime import install_realtime
from functions.app import INNGEST_PATH, serve_functions
from handlers.app import create_app
from infra.settings import Settings


def create_dev_app(settings: Settings, *, assistants: Assistants | None = None) -> FastAPI:
    """`app.state.inngest_functions` lists the functions served, for a local executor.
    `assistants`: those ASSISTANTS names unless given."""
    # Inngest's calls carry every step output so far (up to its own limits: 4 MB a step),
    # as they reach the inngest Lambda, which has no public body limit.
    app = create_app(settings, assistants=assistants, unlimited_paths=frozenset({INNGEST_PATH}))
    state = app.state
    # The same client the routes send with, so that the functions and the routes agree.
    client = state.events.client()
    state.inngest_functions = serve_functions(app, client, state.services, state.assistants)
    # Supabase Realtime's websocket, for supabase-js and supabase-py (devkit/realtime/).
    install_realtime(app)
    return app
