"""OpenAI Chat Completions on the wire: `chat.completion.chunk` SSE lines, `chat.completion`
bodies and error bodies, as api.openai.com sends them."""

from __future__ import annotations

import json
import string
import time
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
from tests.fake_providers.wire import WireEvent, random_id, sse

FINISH_REASONS: dict[Stop, str] = {
    "end": "stop",
    "tool_calls": "tool_calls",
    "max_tokens": "length",
    "content_filter": "content_filter",
}
REQUEST_ID_HEADER = "x-request-id"
SYSTEM_FINGERPRINT = "fp_f4ke0000"
ROLE: dict[str, Any] = {"role": "assistant"}


def request_id() -> str:
    return random_id("req_", 32, string.hexdigits[:16])


def tool_call_id(call: ToolCall) -> str:
    return call.id or random_id("call_", 24)


def stream_events(reply: Reply, body: Mapping[str, Any]) -> list[WireEvent]:
    """The chunks of one streamed completion, `[DONE]` included."""
    options = body.get("stream_options") or {}
    include_usage = bool(options.get("include_usage"))
    # Chunks carry an `obfuscation` pad unless the request turns it off.
    obfuscate = options.get("include_obfuscation", True) is not False
    envelope = {
        "id": random_id("chatcmpl-", 29),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        data: dict[str, Any] = {**envelope, "choices": [choice]}
        if include_usage:
            data["usage"] = None  # every chunk but the last carries a null usage
        if obfuscate:
            data["obfuscation"] = random_id("", 8)
        return sse(json.dumps(data))

    events: list[WireEvent] = []
    said_role = False
    if reply.text or not reply.tool_calls:
        events.append(WireEvent(chunk(ROLE | {"content": "", "refusal": None}), "prelude"))
        said_role = True
    events += [WireEvent(chunk({"content": piece}), "delta") for piece in reply.text]
    for index, call in enumerate(reply.tool_calls):
        opening = {
            "index": index,
            "id": tool_call_id(call),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        delta: dict[str, Any] = {"tool_calls": [opening]}
        if not said_role:
            # A reply that opens with a tool call says its role in that chunk, content null.
            delta = ROLE | {"content": None, "tool_calls": [opening], "refusal": None}
            said_role = True
        events.append(WireEvent(chunk(delta), "start"))
        for piece in call.argument_pieces():
            fragment = {"index": index, "function": {"arguments": piece}}
            events.append(WireEvent(chunk({"tool_calls": [fragment]}), "delta"))
    events.append(WireEvent(chunk({}, FINISH_REASONS[reply.stop_reason]), "closing"))
    if include_usage:
        data = {**envelope, "choices": [], "usage": usage_body(reply.usage_for(body))}
        if obfuscate:
            data["obfuscation"] = random_id("", 8)
        events.append(WireEvent(sse(json.dumps(data)), "closing"))
    events.append(WireEvent(sse("[DONE]"), "closing"))
    return events


def completion(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    """The `chat.completion` body of a request made without `stream`."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(reply.text) if reply.text or not reply.tool_calls else None,
        "refusal": None,
        "annotations": [],
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": tool_call_id(call),
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(call.argument_pieces())},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": random_id("chatcmpl-", 29),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": FINISH_REASONS[reply.stop_reason],
            }
        ],
        "usage": usage_body(reply.usage_for(body)),
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }


def usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def error(
    error_type: str, message: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def http_fault(fault: HttpFault, model: str) -> tuple[int, dict[str, Any]]:
    """The status and body OpenAI answers with for `fault`."""
    match fault:
        case RateLimited():
            message = (
                f"Rate limit reached for {model} in organization org-fake on requests per min"
                " (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s."
            )
            return 429, error("requests", message, "rate_limit_exceeded")
        case ServerError():
            message = "The server had an error while processing your request. Sorry about that!"
            return 500, error("server_error", message)
        case Overloaded():
            return 503, error("server_error", "The server is overloaded or not ready yet.")


def stream_error_event() -> bytes:
    """An error reported inside a stream that had already started: a `data:` line the SDK
    raises `APIError` for."""
    message = "The server had an error while processing your request. Sorry about that!"
    return sse(json.dumps(error("server_error", message)))


def missing_key() -> tuple[int, dict[str, Any]]:
    message = (
        "You didn't provide an API key. You need to provide your API key in an Authorization"
        " header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
    )
    return 401, error("invalid_request_error", message)
