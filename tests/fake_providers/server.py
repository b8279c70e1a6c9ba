"""The fake's ASGI app: pops one scripted reply per request, records the request, and answers
in the wire format of the provider whose path was called."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from devkit.local_inngest import serve_asgi
from tests.fake_providers import anthropic_wire, openai_wire
from tests.fake_providers.script import (
    CleanEof,
    CutStream,
    Fault,
    HttpFault,
    RateLimited,
    Received,
    Reply,
    StreamError,
    echo_reply,
)
from tests.fake_providers.wire import WireEvent


class ConnectionDropped(Exception):
    """Raised mid-body so that uvicorn closes the connection without ending the response."""


# What a request that finds the queue empty gets when the fake varies (`FakeProviders.vary`):
# a reply by the request's number, counting the fake's requests from 0, and its body.
Answer = Callable[[int, Mapping[str, Any]], Reply]


class FakeProviders:
    """Scripted replies in, recorded requests out. Serve `app()` (see `serve_fake_providers`)."""

    def __init__(self, first_chunk_delay_ms: float = 0) -> None:
        # The echo's wait before its first chunk: a model's time to first token, for a bench.
        self.first_chunk_delay_ms = first_chunk_delay_ms
        self.replies: deque[Reply] = deque()
        self.requests: list[Received] = []
        self.origin = ""
        self._answer: Answer | None = None

    def script(self, *replies: Reply) -> None:
        """Queue replies: each request pops the next; an empty queue echoes the user."""
        self.replies.extend(replies)

    def vary(self, answer: Answer | None) -> None:
        """Answer a request that finds the queue empty with `answer(n, body)`, `n` counting
        the fake's requests (both providers') from 0, instead of the echo; None: the echo."""
        self._answer = answer

    @property
    def openai_base_url(self) -> str:
        return self.origin + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.origin

    def bodies(self, provider: Literal["openai", "anthropic"]) -> list[Mapping[str, Any]]:
        return [r.body for r in self.requests if r.provider == provider]

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
            ]
        )

    async def _receive(
        self, provider: Literal["openai", "anthropic"], request: Request
    ) -> dict[str, Any]:
        body: dict[str, Any] = await request.json()
        headers = dict(request.headers.items())
        self.requests.append(Received(provider, request.url.path, headers, body))
        return body

    def _next_reply(self, body: Mapping[str, Any]) -> Reply:
        if self.replies:
            return self.replies.popleft()
        if self._answer is not None:
            # This request is recorded already: it is number len - 1.
            return self._answer(len(self.requests) - 1, body)
        return replace(echo_reply(body), first_chunk_delay_ms=self.first_chunk_delay_ms)

    async def _openai(self, request: Request) -> Response:
        body = await self._receive("openai", request)
        headers = {openai_wire.REQUEST_ID_HEADER: openai_wire.request_id()}
        if not bearer_key(request):
            status, data = openai_wire.missing_key()
            return JSONResponse(data, status, headers)
        reply = self._next_reply(body)
        if isinstance(reply.fault, HttpFault):
            status, data = openai_wire.http_fault(reply.fault, str(body.get("model", "")))
            return JSONResponse(data, status, headers | retry_after(reply.fault))
        if body.get("stream"):
            events = openai_wire.stream_events(reply, body)
            return stream(events, reply, openai_wire.stream_error_event(), headers)
        return whole_body(openai_wire.completion(reply, body), reply.fault, headers)

    async def _anthropic(self, request: Request) -> Response:
        body = await self._receive("anthropic", request)
        request_id = anthropic_wire.request_id()
        headers = {anthropic_wire.REQUEST_ID_HEADER: request_id}
        # Anthropic's SDK sends the key as `x-api-key` or, since 2.x, as a bearer token.
        if not (request.headers.get("x-api-key") or bearer_key(request)):
            status, data = anthropic_wire.missing_key(request_id)
            return JSONResponse(data, status, headers)
        reply = self._next_reply(body)
        if isinstance(reply.fault, HttpFault):
            status, data = anthropic_wire.http_fault(reply.fault, request_id)
            return JSONResponse(data, status, headers | retry_after(reply.fault))
        if body.get("stream"):
            events = anthropic_wire.stream_events(reply, body)
            return stream(events, reply, anthropic_wire.stream_error_event(), headers)
        return whole_body(anthropic_wire.complete_message(reply, body), reply.fault, headers)


def bearer_key(request: Request) -> str:
    return request.headers.get("authorization", "").removeprefix("Bearer").strip()


def retry_after(fault: HttpFault) -> dict[str, str]:
    if isinstance(fault, RateLimited) and fault.retry_after is not None:
        return {"retry-after": f"{fault.retry_after:g}"}
    return {}


def stream(
    events: list[WireEvent], reply: Reply, error_event: bytes, headers: dict[str, str]
) -> StreamingResponse:
    """The events as an SSE body, cut short as the reply's fault says."""
    fault = reply.fault
    if isinstance(fault, CutStream | StreamError | CleanEof):
        events = up_to(events, fault.after)

    async def body() -> AsyncIterator[bytes]:
        waited = False
        for event in events:
            if event.kind in ("start", "delta") and not waited:
                await asyncio.sleep(reply.first_chunk_delay_ms / 1000)
                waited = True
            elif event.kind == "delta":
                await asyncio.sleep(reply.chunk_delay_ms / 1000)
            yield event.data
        if isinstance(fault, StreamError):
            yield error_event
        if isinstance(fault, CutStream):
            raise ConnectionDropped("scripted: the connection drops mid-stream")

    headers = headers | {"cache-control": "no-cache"}
    return StreamingResponse(body(), headers=headers, media_type="text/event-stream")


def up_to(events: list[WireEvent], deltas: int | None) -> list[WireEvent]:
    """The events before the closing ones, stopping short of delta number `deltas` + 1."""
    kept: list[WireEvent] = []
    seen = 0
    for event in events:
        if event.kind == "closing":
            break
        if event.kind == "delta":
            if deltas is not None and seen == deltas:
                break
            seen += 1
        kept.append(event)
    return kept


def whole_body(data: dict[str, Any], fault: Fault | None, headers: dict[str, str]) -> Response:
    """A JSON body; under a stream fault, its first half and then a dropped connection."""
    if fault is None:
        return JSONResponse(data, headers=headers)
    raw = json.dumps(data).encode()

    async def half() -> AsyncIterator[bytes]:
        yield raw[: len(raw) // 2]
        raise ConnectionDropped("scripted: the connection drops mid-body")

    headers = headers | {"content-length": str(len(raw))}
    return StreamingResponse(half(), headers=headers, media_type="application/json")


@asynccontextmanager
async def serve_fake_providers(first_chunk_delay_ms: float = 0) -> AsyncIterator[FakeProviders]:
    """The fake served on a loopback port for the duration of the block."""
    fake = FakeProviders(first_chunk_delay_ms)
    async with serve_asgi(fake.app()) as origin:
        fake.origin = origin
        yield fake
