"""A local stand-in for the OpenAI and Anthropic streaming APIs, for driving the real
`langchain-openai` and `langchain-anthropic` clients over HTTP.

    async with serve_fake_providers() as fake:
        fake.script(Reply(text=["Hel", "lo"]), Reply(fault=RateLimited(retry_after=0.1)))
        model = init_chat_model("openai:gpt-4o-mini", base_url=fake.openai_base_url,
                                api_key="test")
        ...
        assert fake.requests[0].body["messages"][-1]["role"] == "user"

Each request pops the next scripted `Reply` (an empty queue echoes the last user text, or, after
`fake.vary(answer)`, gets `answer(n, body)` for the fake's request number `n`: see `Varying`, a
provider that answers differently each time) and is recorded as a `Received` with its path,
headers and JSON body.

Served:

* `POST /v1/chat/completions` (OpenAI Chat Completions). With `stream: true`: `data:` lines
  of `chat.completion.chunk` objects; the first says `role: assistant`; text as `content`
  deltas; each tool call opens with `{index, id, type: function, function: {name,
  arguments: ""}}` and its argument fragments follow by index, call after call; a last chunk
  with an empty delta and `finish_reason` (stop, tool_calls, length, content_filter); with
  `stream_options.include_usage`, null `usage` on every chunk and a final `choices: []` chunk
  with the usage; `obfuscation` pads unless `include_obfuscation` is false; then
  `data: [DONE]`. Without `stream`, a `chat.completion` body.
* `POST /v1/messages` (Anthropic Messages). With `stream: true`: named events:
  `message_start` (input tokens), then per content block (thinking, text, tool_use in that
  order) `content_block_start`, its deltas (`thinking_delta` then a `signature_delta`,
  `text_delta`, `input_json_delta` starting with an empty fragment) and
  `content_block_stop`; a `ping` after the first block opens; `message_delta` with
  `stop_reason` (end_turn, tool_use, max_tokens, refusal) and the usage; `message_stop`.
  Without `stream`, a `message` body.
* Faults (see `script`): 429 with `retry-after`, 500, overload (Anthropic 529, OpenAI 503),
  each with the provider's JSON error body; a connection dropped mid-stream; a clean end of
  the body without the stop events; the provider's in-stream error event. Every response
  carries a request id (`x-request-id` for OpenAI, `request-id` for Anthropic, which also
  names it in error bodies). A request without an API key gets the provider's 401.
  On a request without `stream`, every stream fault drops the connection halfway through the
  body. uvicorn logs each scripted drop as "Exception in ASGI application": that is the drop.

Not reproduced: checking API keys (any non-empty key passes), organisations and projects;
rate-limit headers other than `retry-after` (no `x-ratelimit-*`, `anthropic-ratelimit-*`,
`retry-after-ms`, `x-should-retry`); `openai-processing-ms` and other informational headers;
validation of the request body (models, roles, max_tokens, tool schemas: any JSON is
accepted, and a body that is not JSON fails as a server error); 404s in the providers' shape;
the models list, token counting, the Responses, Batches and Files APIs; logprobs, `n > 1`,
refusals, audio, images, citations, server tools, prompt caching counts (always 0),
redacted thinking; OpenAI reasoning text (Chat Completions streams none, so `thinking` is
Anthropic-only); interleaving of parallel tool calls (each call's fragments are sent before
the next call opens, as the APIs do today); real token counts (see `Reply.usage_for`).
"""

from tests.fake_providers.anthropic_wire import anthropic_texts
from tests.fake_providers.script import (
    CleanEof,
    CutStream,
    Fault,
    Overloaded,
    RateLimited,
    Received,
    Reply,
    ServerError,
    Stop,
    StreamError,
    ToolCall,
    Usage,
)
from tests.fake_providers.server import Answer, FakeProviders, serve_fake_providers
from tests.fake_providers.varying import Varying, retold

__all__ = [
    "Answer",
    "CleanEof",
    "CutStream",
    "FakeProviders",
    "Fault",
    "Overloaded",
    "RateLimited",
    "Received",
    "Reply",
    "ServerError",
    "Stop",
    "StreamError",
    "ToolCall",
    "Usage",
    "Varying",
    "anthropic_texts",
    "retold",
    "serve_fake_providers",
]
