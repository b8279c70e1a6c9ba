"""Anthropic Messages on the wire: named SSE events, `message` bodies and error bodies, as
api.anthropic.com sends them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tests.fake_providers.script import (
    HttpFault,
    Overloaded,
    RateLimited,
    Reply,
    ServerError,
    Stop,
    ToolCall,
    Usage,
)
from tests.fake_providers.wire import EventKind, WireEvent, random_id, sse

STOP_REASONS: dict[Stop, str] = {
    "end": "end_turn",
    "tool_calls": "tool_use",
    "max_tokens": "max_tokens",
    "content_filter": "refusal",
}
REQUEST_ID_HEADER = "request-id"


def request_id() -> str:
    return random_id("req_011C", 20)


def tool_use_id(call: ToolCall) -> str:
    return call.id or random_id("toolu_01", 22)


def stream_events(reply: Reply, body: Mapping[str, Any]) -> list[WireEvent]:
    """The events of one streamed message, `message_stop` included."""
    usage = reply.usage_for(body)
    events: list[WireEvent] = []

    def emit(name: str, data: dict[str, Any], kind: EventKind) -> None:
        events.append(WireEvent(sse(json.dumps({"type": name, **data}), name), kind))

    # The output count at the start is the API's first estimate; message_delta has the total.
    start_usage = usage_body(Usage(usage.input_tokens, 1))
    emit("message_start", {"message": message(body, [], None, start_usage)}, "prelude")
    index = 0

    def block(opening: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        emit("content_block_start", {"index": index, "content_block": opening}, "start")
        if index == 0:
            emit("ping", {}, "meta")  # the API pings once the first block has opened
        for delta in deltas:
            # Each block's scripted pieces are deltas; its other deltas are bookkeeping.
            scripted = delta["type"] in ("text_delta", "thinking_delta") or (
                delta["type"] == "input_json_delta" and delta["partial_json"]
            )
            emit("content_block_delta", {"index": index, "delta": delta}, _kind(scripted))
        emit("content_block_stop", {"index": index}, "meta")
        index += 1

    if reply.thinking:
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [{"type": "thinking_delta", "thinking": t} for t in reply.thinking]
            + [{"type": "signature_delta", "signature": random_id("Eq", 40)}],
        )
    if reply.text:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": piece} for piece in reply.text],
        )
    for call in reply.tool_calls:
        # The API opens each tool's input with an empty fragment.
        pieces = ["", *call.argument_pieces()]
        block(
            {"type": "tool_use", "id": tool_use_id(call), "name": call.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in pieces],
        )
    if index == 0:
        emit("ping", {}, "meta")
    emit(
        "message_delta",
        {
            "delta": {"stop_reason": STOP_REASONS[reply.stop_reason], "stop_sequence": None},
            "usage": {k: v for k, v in usage_body(usage).items() if k != "service_tier"},
        },
        "closing",
    )
    emit("message_stop", {}, "closing")
    return events


def _kind(scripted: bool) -> EventKind:
    return "delta" if scripted else "meta"


def complete_message(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    """The `message` body of a request made without `stream`."""
    content: list[dict[str, Any]] = []
    if reply.thinking:
        thinking = "".join(reply.thinking)
        signature = random_id("Eq", 40)
        content.append({"type": "thinking", "thinking": thinking, "signature": signature})
    if reply.text:
        content.append({"type": "text", "text": "".join(reply.text)})
    for call in reply.tool_calls:
        arguments = json.loads("".join(call.argument_pieces()))
        content.append(
            {"type": "tool_use", "id": tool_use_id(call), "name": call.name, "input": arguments}
        )
    stop = STOP_REASONS[reply.stop_reason]
    return message(body, content, stop, usage_body(reply.usage_for(body)))


def message(
    body: Mapping[str, Any],
    content: list[dict[str, Any]],
    stop_reason: str | None,
    usage: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": random_id("msg_01", 22),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": usage.output_tokens,
        "service_tier": "standard",
    }


def error(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def http_fault(fault: HttpFault, request: str) -> tuple[int, dict[str, Any]]:
    """The status and body Anthropic answers with for `fault`; the body names the request."""
    match fault:
        case RateLimited():
            message = (
                "This request would exceed the rate limit for your organization of 50 requests"
                " per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."
            )
            status, data = 429, error("rate_limit_error", message)
        case ServerError():
            status, data = 500, error("api_error", "Internal server error")
        case Overloaded():
            status, data = 529, error("overloaded_error", "Overloaded")
    return status, {**data, "request_id": request}


def stream_error_event() -> bytes:
    """An error inside a stream that had already started, as the API reports overload."""
    return sse(json.dumps(error("overloaded_error", "Overloaded")), "error")


def missing_key(request: str) -> tuple[int, dict[str, Any]]:
    data = error("authentication_error", "x-api-key header is required")
    return 401, {**data, "request_id": request}


def anthropic_texts(anthropic_request: Mapping[str, Any]) -> list[str]:
    """The text blocks of an Anthropic request's messages, in order; fails on any other block."""
    found: list[str] = []
    for m in anthropic_request["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else [m["content"]]
        for block in blocks:
            if isinstance(block, str):
                found.append(block)
                continue
            assert block["type"] == "text", block
            found.append(block["text"])
    return found
