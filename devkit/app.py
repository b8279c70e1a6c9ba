"""The app `handoff dev`, the tests and the benchmarks run: the HTTP routes and the Inngest
serve endpoint on one server, as the two Lambdas serve them apart, and Supabase Realtime's
websocket in place of Realtime."""

from __future__ import annotations

from fastapi import FastAPI
from langchain_core.tools import BaseTool

from agent.tools import demo_tools
from devkit.realtime import install_realtime
from functions.app import INNGEST_PATH, serve_functions
from handlers.app import create_app
from infra.settings import Settings


def create_dev_app(settings: Settings, *, tools: list[BaseTool] | None = None) -> FastAPI:
    """`app.state.inngest_functions` lists the functions served, for a local executor."""
    tools = tools if tools is not None else demo_tools()
    # Inngest's calls carry every step output so far (up to its own limits: 4 MB a step),
    # as they reach the inngest Lambda, which has no public body limit.
    app = create_app(settings, tools=tools, unlimited_paths=frozenset({INNGEST_PATH}))
    state = app.state
    state.inngest_functions = serve_functions(app, state.events, state.services, tools)
    # Supabase Realtime's websocket, for supabase-js and supabase-py (devkit/realtime/).
    install_realtime(app)
    return app
