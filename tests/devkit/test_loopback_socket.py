"""Servers on a loopback socket send each small write at once (no Nagle delay)."""

from __future__ import annotations

import asyncio
import socket

from devkit.local_inngest import loopback_socket


async def test_connections_accepted_on_a_loopback_socket_disable_nagle() -> None:
    # GIVEN a server listening on a loopback socket, as the dev server and the tests serve
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted: socket.socket = writer.get_extra_info("socket")
        seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(handle, sock=loopback_socket())
    async with server:
        host, port = server.sockets[0].getsockname()[:2]
        # WHEN a client connects
        _, writer = await asyncio.open_connection(host, port)
        # THEN the accepted connection has TCP_NODELAY: an SSE event written after the response
        # headers leaves at once instead of waiting for the client's delayed ACK
        assert await asyncio.wait_for(seen, 5) != 0
        writer.close()
