"""What both providers' wire modules share: one SSE event tagged by its role in the stream, and
the server's ids."""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from typing import Literal

# prelude: sent before the model says anything (OpenAI's role chunk, Anthropic's message_start);
# start: a content block or tool call opens, with its name; delta: one scripted piece of text,
# thinking or tool arguments (faults count these); meta: bookkeeping between them (pings,
# block stops, signatures); closing: the stop reason, usage and end-of-stream markers.
EventKind = Literal["prelude", "start", "delta", "meta", "closing"]

_ALPHANUMERIC = string.ascii_letters + string.digits


@dataclass(frozen=True)
class WireEvent:
    data: bytes
    kind: EventKind


def sse(data: str, event: str | None = None) -> bytes:
    """One Server-Sent Event: OpenAI sends `data:` lines only, Anthropic names each event."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n".encode()


def random_id(prefix: str, length: int, alphabet: str = _ALPHANUMERIC) -> str:
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))
