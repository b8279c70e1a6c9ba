"""A streaming SSE client that notes when each event arrives."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse


@dataclass(frozen=True)
class Arrival:
    event: str
    data: Any
    at: float  # time.perf_counter() when the event's last line arrived


@dataclass
class Stream:
    """The events of one response, timed from just before the request was sent."""

    sent: float
    status: int
    events: list[Arrival] = field(default_factory=list)

    def first(self, event: str) -> Arrival | None:
        return next((e for e in self.events if e.event == event), None)

    def last(self, event: str) -> Arrival | None:
        return next((e for e in reversed(self.events) if e.event == event), None)


async def post_stream(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Stream:
    """POST and read the SSE response to its end, stamping each event as it is parsed."""
    sent = time.perf_counter()
    # aconnect_sse adds its Accept header to the dict it is handed: give it one of its own.
    async with aconnect_sse(http, "POST", url, json=body, headers=dict(headers or {})) as source:
        response = source.response
        stream = Stream(sent=sent, status=response.status_code)
        if response.status_code != 200:
            await response.aread()
            return stream
        async for sse in source.aiter_sse():
            # An event without data (a ping, say) has no JSON to decode and nothing to time.
            if sse.data:
                stream.events.append(Arrival(sse.event, sse.json(), time.perf_counter()))
    return stream


def client(origin: str, timeout: float = 60) -> httpx.AsyncClient:
    """A client that sends each write at once: without TCP_NODELAY, the request body waits
    behind its headers for the server's delayed ACK (up to 40 ms on Linux)."""
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    transport = httpx.AsyncHTTPTransport(socket_options=nodelay, limits=httpx.Limits())
    return httpx.AsyncClient(base_url=origin, timeout=timeout, transport=transport)
