"""First token with OpenTelemetry on (exporting over OTLP/HTTP) against off, side by side.

Two Handoff stacks in child processes on one database: one with no OTEL_* variables (the API's
no-op providers), one exporting every span and metric to a collector in this process, which
reads and counts what arrives (OTLP/HTTP, protobuf). Runs alternate between them, so a noisy
moment of the machine lands on both sides alike. Target: at most 1 ms added to the p50.

    python3 -m uv run python -m bench.tracing --runs 100
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from bench.providers import handoff_first_token
from bench.sse import client
from bench.stack import child_server, create_chats
from bench.stats import Table, ms, p50, p95
from devkit.local_inngest import serve_asgi
from tests.databases import fresh_database, migrated_template, resolve_server_url
from tests.support import token_for


@contextmanager
def exported(env: dict[str, str]) -> Iterator[None]:
    os.environ.update(env)
    try:
        yield
    finally:
        for name in env:
            del os.environ[name]


@dataclass
class Collector:
    """An OTLP/HTTP endpoint that accepts everything and counts it."""

    requests: int = 0
    bytes: int = 0
    traces: int = 0  # requests to /v1/traces

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await Request(scope, receive).body()
        self.requests += 1
        self.bytes += len(body)
        self.traces += scope["path"] == "/v1/traces"
        await Response(status_code=200, media_type="application/x-protobuf")(scope, receive, send)


async def measure(database_url: str, runs: int, collector: Collector | None = None) -> Table:
    collector = collector or Collector()
    user = uuid.uuid4()
    token = token_for(user, exp=int(time.time()) + 3600)
    chats = await create_chats(database_url, user, 2 * runs + 2)
    async with serve_asgi(collector) as endpoint:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_METRIC_EXPORT_INTERVAL": "1000",
        }
        # Tokens at once: the first token measures the handler, not the model.
        instant = {"scripted_token_delay_ms": "0"}
        async with AsyncExitStack() as stacks:
            off_origin = await stacks.enter_async_context(
                child_server("handoff", database_url, **instant)
            )
            with exported(env):  # the child's environment is a copy of ours
                on_origin = await stacks.enter_async_context(
                    child_server("handoff", database_url, **instant)
                )
            off = await stacks.enter_async_context(client(off_origin))
            on = await stacks.enter_async_context(client(on_origin))
            await handoff_first_token(off, token, chats[-1])  # warm up both
            await handoff_first_token(on, token, chats[-2])
            sides: dict[str, list[float]] = {"off": [], "on": []}
            for i in range(runs):
                sides["off"].append(await handoff_first_token(off, token, chats[2 * i]))
                sides["on"].append(await handoff_first_token(on, token, chats[2 * i + 1]))
            await asyncio.sleep(1.5)  # the last batch and metrics export
    added = [b - a for a, b in zip(sides["off"], sides["on"], strict=True)]
    table = Table(
        "First token with tracing off and on (scripted model, no token delay)",
        ("tracing", "runs", "p50 ms", "p95 ms", "added p50 ms", "added p95 ms"),
    )
    table.add(
        "off (no OTEL_* variables)", runs, ms(p50(sides["off"])), ms(p95(sides["off"])), "", ""
    )
    table.add(
        "on (OTLP/HTTP to a local collector)",
        runs,
        ms(p50(sides["on"])),
        ms(p95(sides["on"])),
        ms(p50(added)),
        ms(p95(added)),
    )
    table.notes.append(
        f"The collector received {collector.requests} OTLP requests, {collector.bytes:,} bytes"
        f" ({collector.traces} of traces)."
        " Added: each run with tracing minus the run without it just before it. Target: at"
        " most 1 ms added at p50."
    )
    return table


async def run(runs: int) -> str:
    server = resolve_server_url()
    async with migrated_template(server) as template, fresh_database(server, template) as url:
        return (await measure(url, runs)).render()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="turns per side")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    print(asyncio.run(run(args.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
