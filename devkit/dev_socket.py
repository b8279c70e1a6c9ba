"""The socket `handoff dev` serves on, listening before anything else starts."""

from __future__ import annotations

import errno
import socket

from devkit.local_inngest import loopback_socket

LISTEN_BACKLOG = 2048  # uvicorn's


class PortUnavailable(Exception):
    """The server's port cannot be had; the message says so in one sentence."""


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, listening already: a busy port is found before anything starts."""
    try:
        sock = loopback_socket(host) if port == 0 else bound_socket(host, port)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortUnavailable(
                f"port {port} on {host} is in use (another handoff dev?): stop what uses it,"
                " or pick another port with --port"
            ) from exc
        raise PortUnavailable(
            f"cannot listen on {host} port {port} ({exc.strerror or exc}): pick another host"
            " with --host or another port with --port"
        ) from exc
    return sock


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host` and `port`, not listening yet."""
    # IPPROTO_TCP so asyncio disables Nagle on accepted connections (see loopback_socket).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
