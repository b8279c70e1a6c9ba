"""`handoff dev` on a fixed port sends each SSE event at once, as on a free one."""

from __future__ import annotations

import asyncio
import socket

from devkit.dev_socket import bound_socket


async def test_connections_to_the_dev_server_port_disable_nagle() -> None:
    # GIVEN the socket `handoff dev --port N` serves on
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted: socket.socket = writer.get_extra_info("socket")
        seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(handle, sock=bound_socket("127.0.0.1", 0))
    async with server:
        host, port = server.sockets[0].getsockname()[:2]
        # WHEN a client connects
        _, writer = await asyncio.open_connection(host, port)
        # THEN the connection has TCP_NODELAY: no delayed-ACK stall between SSE events
        assert await asyncio.wait_for(seen, 5) != 0
        writer.close()
