"""Loopback sockets and an embedded uvicorn, to serve the app and the intake in-process."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterator

import uvicorn
from starlette.types import ASGIApp


def loopback_socket(host: str = "127.0.0.1") -> socket.socket:
    """A bound socket on a free port: reserve origins before building clients/apps."""
    # proto=IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on connections whose
    # socket says TCP. Without it, Nagle holds each small SSE write until the client's delayed
    # ACK (~40 ms on Linux) releases it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def socket_origin(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}"


class _EmbeddedServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stopping = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # An embedded server must not take over the host process's SIGINT/SIGTERM;
        # nested servers would also restore each other's handlers in the wrong order.
        yield

    async def main_loop(self) -> None:
        # uvicorn's loop notices `should_exit` at its next 0.1 s tick; its owner, who waits for
        # it to stop, wakes it at once instead. The ticks still run (the Date header).
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), 0.1)

    def stop(self) -> None:
        self.should_exit = True
        self.stopping.set()


@contextlib.asynccontextmanager
async def serve_asgi(
    app: ASGIApp, sock: socket.socket | None = None, startup_timeout: float = 10.0
) -> AsyncIterator[str]:
    """Run ``app`` with uvicorn on the current loop; yields its ``http://host:port``."""
    async with serve_asgi_together(
        (app, sock or loopback_socket()), startup_timeout=startup_timeout
    ) as (origin,):
        yield origin


@contextlib.asynccontextmanager
async def serve_asgi_together(
    *apps: tuple[ASGIApp, socket.socket], startup_timeout: float = 10.0
) -> AsyncIterator[list[str]]:
    """Run each app under its own uvicorn; yields their origins, in order.

    They stop together, so their graceful shutdowns (a fixed 0.1 s each in uvicorn, then the
    apps' lifespans) overlap rather than add up."""
    servers: list[tuple[_EmbeddedServer, asyncio.Task[None], socket.socket]] = []
    try:
        for app, sock in apps:
            config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
            server = _EmbeddedServer(config)
            servers.append((server, asyncio.create_task(server.serve(sockets=[sock])), sock))
        deadline = time.monotonic() + startup_timeout
        while not all(server.started for server, _, _ in servers):
            if any(task.done() for _, task, _ in servers) or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            await asyncio.sleep(0.01)
        yield [socket_origin(sock) for _, _, sock in servers]
    finally:
        for server, _, _ in servers:
            server.stop()
        await asyncio.gather(*(task for _, task, _ in servers))
        for _, _, sock in servers:
            sock.close()
