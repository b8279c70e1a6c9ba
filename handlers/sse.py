"""Server-Sent Events as the routes send them: one JSON object per event."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence

from fastapi.responses import StreamingResponse
from sse_starlette import ServerSentEvent
from starlette.types import Receive, Scope, Send

# Proxies must neither cache the stream nor buffer it (nginx honours X-Accel-Buffering).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse(event: str, data: Mapping[str, object]) -> bytes:
    """One event, framed by sse-starlette, its data compact JSON on one line."""
    payload = json.dumps(data, separators=(",", ":"))
    return ServerSentEvent(data=payload, event=event, sep="\n").encode()


def event_stream(
    events: AsyncIterator[Sequence[tuple[str, Mapping[str, object]]]],
    *,
    turn: asyncio.Task[None] | None = None,
) -> StreamingResponse:
    """`events`, batches of them, as a response, each batch in one write; while `turn` runs,
    the request lasts until it ends."""

    async def frames() -> AsyncIterator[bytes]:
        async for batch in events:
            yield b"".join(sse(name, data) for name, data in batch)

    if turn is None:
        return StreamingResponse(frames(), media_type="text/event-stream", headers=SSE_HEADERS)
    return TurnResponse(frames(), turn=turn)


class TurnResponse(StreamingResponse):
    """The SSE stream of a turn, whose request lasts until the turn's work is done.

    A client that hangs up ends the stream early, but the request itself still waits for the
    turn to be stored and handed off: on Lambda, the end of the request is when the platform may
    freeze the process, and a turn frozen half-way would wait for the next invocation, or for
    ever.
    """

    def __init__(self, content: AsyncIterator[bytes], *, turn: asyncio.Task[None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers=SSE_HEADERS)
        self.turn = turn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await asyncio.wait({self.turn})
