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
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # An embedded server must not take over the host process's SIGINT/SIGTERM;
        # nested servers would also restore each other's handlers in the wrong order.
        yield


@contextlib.asynccontextmanager
async def serve_asgi(
    app: ASGIApp, sock: socket.socket | None = None, startup_timeout: float = 10.0
) -> AsyncIterator[str]:
    """Run ``app`` with uvicorn on the current loop; yields its ``http://host:port``."""
    sock = sock or loopback_socket()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if task.done() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            await asyncio.sleep(0.01)
        yield socket_origin(sock)
    finally:
        server.should_exit = True
        await task
        sock.close()
