"""What the fake model says for one request: a `Reply`, its tool calls, usage, stop and fault."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# Provider-neutral stop reasons; each wire module maps them to its provider's word.
Stop = Literal["end", "tool_calls", "max_tokens", "content_filter"]

# Tool arguments go out in pieces this long unless a ToolCall names its own fragments:
# OpenAI and Anthropic both split arguments into a few characters per delta.
ARGUMENT_PIECE_CHARS = 6


@dataclass(frozen=True)
class ToolCall:
    """One tool call. `fragments`, when given, are sent verbatim as the argument deltas (in a
    stream they need not join to valid JSON; Anthropic's whole `message` body needs them to);
    otherwise `args` is serialised and cut into short pieces."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    fragments: Sequence[str] | None = None
    id: str | None = None

    def argument_pieces(self) -> list[str]:
        if self.fragments is not None:
            return list(self.fragments)
        text = json.dumps(dict(self.args))
        return [
            text[i : i + ARGUMENT_PIECE_CHARS] for i in range(0, len(text), ARGUMENT_PIECE_CHARS)
        ]


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int


# --- faults -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RateLimited:
    """HTTP 429 with the provider's error body; `retry_after` seconds in `retry-after`."""

    retry_after: float | None = 1.0


@dataclass(frozen=True)
class ServerError:
    """HTTP 500 with the provider's error body."""


@dataclass(frozen=True)
class Overloaded:
    """Anthropic's HTTP 529 `overloaded_error`; OpenAI answers 503 for the same condition."""


@dataclass(frozen=True)
class CutStream:
    """The connection drops after `after` deltas (text, thinking or argument pieces), without
    the response's terminating chunk: the client sees an incomplete body."""

    after: int = 0


@dataclass(frozen=True)
class CleanEof:
    """The body ends properly, but without the stop events: OpenAI sends no `finish_reason`,
    usage chunk or `[DONE]`; Anthropic no `message_delta` or `message_stop`. After `after`
    deltas, or once every content event is out when None."""

    after: int | None = None


@dataclass(frozen=True)
class StreamError:
    """After `after` deltas, the provider's in-stream error event (Anthropic `event: error`
    with `overloaded_error`, OpenAI `data: {"error": ...}`), then the body ends."""

    after: int = 0


HttpFault = RateLimited | ServerError | Overloaded
StreamFault = CutStream | CleanEof | StreamError
Fault = HttpFault | StreamFault


@dataclass(frozen=True)
class Reply:
    """What the model says for one request.

    `stop` defaults to "tool_calls" when there are tool calls, else "end". `usage` defaults to
    a count the fake makes up (see `usage_for`). `thinking` is streamed by Anthropic only:
    Chat Completions streams no reasoning text. `first_chunk_delay_ms` passes after the
    response headers, before the first content; `chunk_delay_ms` between deltas.
    """

    text: Sequence[str] = ()
    tool_calls: Sequence[ToolCall] = ()
    thinking: Sequence[str] = ()
    stop: Stop | None = None
    usage: Usage | None = None
    first_chunk_delay_ms: float = 0
    chunk_delay_ms: float = 0
    fault: Fault | None = None

    @property
    def stop_reason(self) -> Stop:
        if self.stop is not None:
            return self.stop
        return "tool_calls" if self.tool_calls else "end"

    def usage_for(self, body: Mapping[str, Any]) -> Usage:
        """The scripted usage, else about one token per four characters of the request's
        messages in and one per delta out: stable for a given script, never zero."""
        if self.usage is not None:
            return self.usage
        prompt = json.dumps(body.get("messages", []), sort_keys=True)
        pieces = len(self.text) + len(self.thinking)
        pieces += sum(len(c.argument_pieces()) for c in self.tool_calls)
        return Usage(input_tokens=max(1, len(prompt) // 4), output_tokens=max(1, pieces))


def echo_reply(body: Mapping[str, Any]) -> Reply:
    """The reply when nothing is scripted: the last user text back, word by word."""
    words = f'You said: "{last_user_text(body)}"'.split(" ")
    return Reply(text=[w if i == len(words) - 1 else w + " " for i, w in enumerate(words)])


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last `user` message, its content a string or a list of blocks (both
    providers accept both; Anthropic's tool results are user messages with no text block)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if b.get("type") == "text"]
        if texts:
            return "".join(texts)
    return ""


@dataclass(frozen=True)
class Received:
    """One request as the fake received it."""

    provider: Literal["openai", "anthropic"]
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
