"""Server-Sent Events as the routes send them: one JSON object per event."""

from __future__ import annotations

import json
from typing import Any

from sse_starlette import ServerSentEvent

# Proxies must neither cache the stream nor buffer it (nginx honours X-Accel-Buffering).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One event, framed by sse-starlette, its data compact JSON on one line."""
    payload = json.dumps(data, separators=(",", ":"))
    return ServerSentEvent(data=payload, event=event, sep="\n").encode()
