"""The real provider integrations (langchain-openai, langchain-anthropic) over HTTP against
tests/fake_providers: what a streamed turn, a tool round and each fault look like to our code."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal

import anthropic
import httpx2
import openai
import pytest
from langchain.chat_models import init_chat_model
from langchain_core.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelError,
    ModelRateLimitError,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import build_agent_graph
from agent.state import AgentState
from agent.threads import ThreadId, thread_config
from demo.tools import calc
from tests.fake_providers import (
    CleanEof,
    CutStream,
    FakeProviders,
    Fault,
    Overloaded,
    RateLimited,
    Reply,
    ServerError,
    Stop,
    StreamError,
    ToolCall,
    Usage,
    serve_fake_providers,
)

ProviderName = Literal["openai", "anthropic"]
PROVIDERS: tuple[ProviderName, ...] = ("openai", "anthropic")
# The stop reason's key in response_metadata, and each neutral stop in the provider's words.
STOP_KEY = {"openai": "finish_reason", "anthropic": "stop_reason"}
STOP_WORDS: dict[Stop, dict[ProviderName, str]] = {
    "end": {"openai": "stop", "anthropic": "end_turn"},
    "tool_calls": {"openai": "tool_calls", "anthropic": "tool_use"},
    "max_tokens": {"openai": "length", "anthropic": "max_tokens"},
    "content_filter": {"openai": "content_filter", "anthropic": "refusal"},
}


@pytest.fixture(scope="module")
async def served() -> AsyncIterator[FakeProviders]:
    # One server for the module: stopping uvicorn takes a good part of a second.
    async with serve_fake_providers() as fake:
        yield fake


@pytest.fixture
def fake(served: FakeProviders) -> FakeProviders:
    served.replies.clear()
    served.requests.clear()
    return served


@pytest.fixture
def refuse_thread_hops(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """Call it in the test's loop: from then on what is sent to the loop's executor is refused
    and listed. LangGraph runs a plain route or node there, a hop to a worker thread and back at
    each step."""

    def start() -> list[str]:
        hops: list[str] = []

        def refused(executor: object, func: Any, *args: object) -> Any:
            hops.append(getattr(func, "__qualname__", repr(func)))
            raise AssertionError(f"a hop to a worker thread: {func!r}")

        monkeypatch.setattr(asyncio.get_running_loop(), "run_in_executor", refused)
        return hops

    return start


def make_model(provider: ProviderName, fake: FakeProviders, **kwargs: Any) -> BaseChatModel:
    """The model as `init_chat_model` builds it, pointed at the fake."""
    if provider == "openai":
        # A custom base_url turns usage streaming off unless asked for.
        kwargs.setdefault("stream_usage", True)
        name, base_url = "openai:gpt-4o-mini", fake.openai_base_url
    else:
        name, base_url = "anthropic:claude-haiku-4-5", fake.anthropic_base_url
    model = init_chat_model(name, base_url=base_url, api_key="test", **kwargs)
    # `**kwargs` could hold configurable_fields, so the overloads leave the type open.
    assert isinstance(model, BaseChatModel)
    return model


def with_calc(model: BaseChatModel) -> Runnable[LanguageModelInput, AIMessage]:
    return model.bind_tools([calc])


async def stream(
    model: Runnable[LanguageModelInput, Any], messages: Sequence[BaseMessage] | str = "hi"
) -> list[AIMessageChunk]:
    return await stream_into([], model, messages)


async def stream_into(
    chunks: list[AIMessageChunk],
    model: Runnable[LanguageModelInput, Any],
    messages: Sequence[BaseMessage] | str = "hi",
) -> list[AIMessageChunk]:
    """`stream`, appending to `chunks` as they come: what arrived before an error stays there."""
    async for chunk in model.astream(messages):
        assert isinstance(chunk, AIMessageChunk)
        chunks.append(chunk)
    return chunks


def merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk
    return total


def text_of(content: str | list[Any]) -> str:
    """The text of a message's content: a string, or the `text` blocks of a list."""
    if isinstance(content, str):
        return content
    return "".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text")


# --- a streamed turn --------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_text_arrives_chunk_by_chunk_as_the_server_sends_it(
    provider: ProviderName, fake: FakeProviders
) -> None:
    # GIVEN a reply whose first piece comes after 200 ms and the others 100 ms apart
    fake.script(Reply(text=["Hel", "lo", " there"], first_chunk_delay_ms=200, chunk_delay_ms=100))
    model = make_model(provider, fake)

    # WHEN it is streamed
    started = time.monotonic()
    arrivals: list[tuple[float, str]] = []
    async for chunk in model.astream("hi"):
        if text := text_of(chunk.content):
            arrivals.append((time.monotonic() - started, text))

    # THEN each piece is its own chunk, delivered when sent rather than buffered to the end
    assert [text for _, text in arrivals] == ["Hel", "lo", " there"]
    assert arrivals[0][0] >= 0.2
    assert arrivals[-1][0] - arrivals[0][0] >= 0.18


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_usage_arrives_in_usage_metadata(provider: ProviderName, fake: FakeProviders) -> None:
    fake.script(Reply(text=["ok"], usage=Usage(input_tokens=12, output_tokens=3)))

    message = merged(await stream(make_model(provider, fake)))

    assert message.usage_metadata is not None
    assert message.usage_metadata["input_tokens"] == 12
    assert message.usage_metadata["output_tokens"] == 3
    assert message.usage_metadata["total_tokens"] == 15


async def test_openai_streams_usage_only_when_asked_for_with_a_custom_base_url(
    fake: FakeProviders,
) -> None:
    # GIVEN the OpenAI model made as the product makes it: no stream_usage
    fake.script(Reply(text=["ok"], usage=Usage(input_tokens=12, output_tokens=3)))
    model = init_chat_model("openai:gpt-4o-mini", base_url=fake.openai_base_url, api_key="test")

    message = merged(await stream(model))

    # THEN the request asked for no usage chunk and none arrived
    assert "stream_options" not in fake.requests[0].body
    assert message.usage_metadata is None


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stop", ["end", "max_tokens", "content_filter"])
async def test_the_stop_reason_is_in_response_metadata(
    provider: ProviderName, stop: Stop, fake: FakeProviders
) -> None:
    fake.script(Reply(text=["cut sh"], stop=stop))

    message = merged(await stream(make_model(provider, fake)))

    assert message.response_metadata[STOP_KEY[provider]] == STOP_WORDS[stop][provider]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_request_without_streaming_gets_the_whole_message(
    provider: ProviderName, fake: FakeProviders
) -> None:
    fake.script(Reply(text=["all ", "at once"], usage=Usage(5, 2)))

    message = await make_model(provider, fake).ainvoke("hi")

    assert not fake.requests[0].body.get("stream")
    assert text_of(message.content) == "all at once"
    assert message.response_metadata[STOP_KEY[provider]] == STOP_WORDS["end"][provider]
    assert isinstance(message, AIMessage)
    assert message.usage_metadata is not None
    assert message.usage_metadata["total_tokens"] == 7


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_answer_through_the_agent_graph_makes_no_hop_to_a_worker_thread(
    provider: ProviderName, fake: FakeProviders, refuse_thread_hops: Callable[[], list[str]]
) -> None:
    # GIVEN the agent graph on the provider's model, which has answered once: the SDK's client
    # reads the platform on a worker thread at its first request, and only then
    graph = build_agent_graph(make_model(provider, fake), [], InMemorySaver())
    fake.script(Reply(text=["first"]), Reply(text=["second ", "answer"]))

    async def streamed(thread: str) -> list[Any]:
        said: AgentState = {"messages": [HumanMessage("hi")]}
        config = thread_config(ThreadId(thread))
        return [c async for c in graph.astream(said, config, stream_mode="messages")]

    await streamed("t:a")
    hops = refuse_thread_hops()

    # WHEN it answers again, streamed as a turn streams it
    chunks = await streamed("t:b")

    # THEN nothing went to a worker thread, and the answer came
    assert hops == []
    assert chunks
    assert len(fake.requests) == 2


# --- tools ------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_parallel_tool_call_fragments_assemble_into_tool_calls(
    provider: ProviderName, fake: FakeProviders
) -> None:
    # GIVEN two calls, one with its arguments cut mid-key
    fake.script(
        Reply(
            text=["Working it out."],
            tool_calls=[
                ToolCall("calc", {"input": "2*21"}, id="call_one"),
                ToolCall("calc", fragments=['{"in', 'put": "6', '*7"}'], id="call_two"),
            ],
        )
    )

    message = merged(await stream(with_calc(make_model(provider, fake))))

    assert message.tool_calls == [
        {"name": "calc", "args": {"input": "2*21"}, "id": "call_one", "type": "tool_call"},
        {"name": "calc", "args": {"input": "6*7"}, "id": "call_two", "type": "tool_call"},
    ]
    assert text_of(message.content) == "Working it out."
    assert message.response_metadata[STOP_KEY[provider]] == STOP_WORDS["tool_calls"][provider]


async def test_openai_receives_bound_tools_as_functions(fake: FakeProviders) -> None:
    await stream(with_calc(make_model("openai", fake)))

    [tool] = fake.requests[0].body["tools"]
    assert tool["type"] == "function"
    assert tool["function"]["name"] == "calc"
    assert tool["function"]["parameters"]["properties"] == {"input": {"type": "string"}}


async def test_anthropic_receives_bound_tools_with_an_input_schema(fake: FakeProviders) -> None:
    await stream(with_calc(make_model("anthropic", fake)))

    [tool] = fake.requests[0].body["tools"]
    assert tool["name"] == "calc"
    assert tool["input_schema"]["properties"] == {"input": {"type": "string"}}


def after_a_tool_round(call_id: str) -> list[BaseMessage]:
    return [
        HumanMessage("what is 2*21?"),
        AIMessage(
            content="",
            tool_calls=[
                {"name": "calc", "args": {"input": "2*21"}, "id": call_id, "type": "tool_call"}
            ],
        ),
        ToolMessage(content="42", tool_call_id=call_id, name="calc"),
    ]


async def test_openai_receives_the_tool_round_as_tool_calls_and_a_tool_message(
    fake: FakeProviders,
) -> None:
    await stream(with_calc(make_model("openai", fake)), after_a_tool_round("call_abc"))

    user, assistant, tool = fake.requests[0].body["messages"]
    assert user == {"role": "user", "content": "what is 2*21?"}
    assert assistant["role"] == "assistant"
    [call] = assistant["tool_calls"]
    assert call["id"] == "call_abc"
    assert call["type"] == "function"
    assert call["function"]["name"] == "calc"
    assert json.loads(call["function"]["arguments"]) == {"input": "2*21"}
    assert tool == {"role": "tool", "content": "42", "tool_call_id": "call_abc"}


async def test_anthropic_receives_the_tool_round_as_tool_use_and_tool_result_blocks(
    fake: FakeProviders,
) -> None:
    await stream(with_calc(make_model("anthropic", fake)), after_a_tool_round("toolu_abc"))

    user, assistant, result = fake.requests[0].body["messages"]
    assert user == {"role": "user", "content": "what is 2*21?"}
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_abc", "name": "calc", "input": {"input": "2*21"}}
        ],
    }
    assert result == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_abc", "content": "42", "is_error": False}
        ],
    }


# --- what Anthropic's chunks hold -------------------------------------------------------------


async def test_anthropic_chunks_are_strings_when_no_tools_are_bound(fake: FakeProviders) -> None:
    fake.script(Reply(text=["Let me ", "check."]))

    chunks = await stream(make_model("anthropic", fake))

    assert [c.content for c in chunks] == ["", "Let me ", "check.", ""]


async def test_anthropic_chunks_are_lists_of_content_blocks_once_tools_are_bound(
    fake: FakeProviders,
) -> None:
    fake.script(
        Reply(
            text=["Let me ", "check."],
            tool_calls=[ToolCall("calc", fragments=['{"input"', ': "2*21"}'], id="toolu_x")],
        )
    )

    chunks = await stream(with_calc(make_model("anthropic", fake)))

    tool_use = {"type": "tool_use", "id": "toolu_x", "name": "calc", "input": {}, "index": 1}
    assert [c.content for c in chunks] == [
        [],  # message_start
        [{"type": "text", "text": "Let me ", "index": 0}],
        [{"type": "text", "text": "check.", "index": 0}],
        [tool_use | {"toolset_name": None}],
        [{"type": "input_json_delta", "partial_json": "", "index": 1}],
        [{"type": "input_json_delta", "partial_json": '{"input"', "index": 1}],
        [{"type": "input_json_delta", "partial_json": ': "2*21"}', "index": 1}],
        [],  # message_delta, with the stop reason and usage
    ]
    # Added up, the blocks merge by index; the text block is the only one with text.
    content = merged(chunks).content
    assert isinstance(content, list)
    assert content[0] == {"type": "text", "text": "Let me check.", "index": 0}
    tool_block = content[1]
    assert isinstance(tool_block, dict)
    assert tool_block["partial_json"] == '{"input": "2*21"}'


async def test_anthropic_thinking_streams_as_thinking_blocks(fake: FakeProviders) -> None:
    fake.script(Reply(thinking=["Two times ", "21."], text=["42"]))
    model = make_model(
        "anthropic", fake, thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=2048
    )

    chunks = await stream(model)

    assert fake.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    thinking = [b for c in chunks for b in c.content if isinstance(b, dict) and "thinking" in b]
    assert [b["thinking"] for b in thinking] == ["Two times ", "21.", ""]
    assert all(b["type"] == "thinking" and b["index"] == 0 for b in thinking)
    assert thinking[-1]["signature"]  # the block's signature comes last, with empty thinking
    assert text_of(merged(chunks).content) == "42"


# --- faults -----------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_429_is_retried_after_the_retry_after_the_server_gave(
    provider: ProviderName, fake: FakeProviders
) -> None:
    fake.script(Reply(fault=RateLimited(retry_after=0.3)), Reply(text=["ok"]))

    started = time.monotonic()
    message = merged(await stream(make_model(provider, fake)))

    assert time.monotonic() - started >= 0.3
    assert text_of(message.content) == "ok"
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", [ServerError(), Overloaded()], ids=["500", "overloaded"])
async def test_a_server_error_is_retried_with_backoff(
    provider: ProviderName, fault: Fault, fake: FakeProviders
) -> None:
    fake.script(Reply(fault=fault), Reply(text=["ok"]))

    message = merged(await stream(make_model(provider, fake)))

    assert text_of(message.content) == "ok"
    assert len(fake.requests) == 2


# provider, fault, the SDK's error, langchain's class for it, status
HTTP_FAULTS: list[tuple[ProviderName, Fault, type[Exception], type[ModelError], int]] = [
    ("openai", RateLimited(), openai.RateLimitError, ModelRateLimitError, 429),
    ("openai", ServerError(), openai.InternalServerError, ModelAPIError, 500),
    ("openai", Overloaded(), openai.InternalServerError, ModelAPIError, 503),
    ("anthropic", RateLimited(), anthropic.RateLimitError, ModelRateLimitError, 429),
    ("anthropic", ServerError(), anthropic.InternalServerError, ModelAPIError, 500),
    ("anthropic", Overloaded(), anthropic.OverloadedError, ModelAPIError, 529),
]


@pytest.mark.parametrize(
    ("provider", "fault", "sdk_error", "model_error", "status"),
    HTTP_FAULTS,
    ids=[f"{provider}-{status}" for provider, *_, status in HTTP_FAULTS],
)
async def test_without_retries_an_http_fault_raises_the_sdk_error_and_langchains_class(
    provider: ProviderName,
    fault: Fault,
    sdk_error: type[Exception],
    model_error: type[ModelError],
    status: int,
    fake: FakeProviders,
) -> None:
    fake.script(Reply(fault=fault))

    with pytest.raises(sdk_error) as caught:
        await stream(make_model(provider, fake, max_retries=0))

    error = caught.value
    assert isinstance(error, model_error)
    assert isinstance(error, openai.APIStatusError | anthropic.APIStatusError)
    assert error.status_code == status
    assert str(error.request_id).startswith("req_")


async def test_openai_gives_up_at_once_when_retry_after_exceeds_two_minutes(
    fake: FakeProviders,
) -> None:
    fake.script(Reply(fault=RateLimited(retry_after=600)))

    with pytest.raises(openai.RateLimitError):
        await stream(make_model("openai", fake))

    assert len(fake.requests) == 1


async def test_anthropic_waits_out_any_retry_after(fake: FakeProviders) -> None:
    # Its SDK honours retry-after however long: a quick path must bound the wait itself.
    fake.script(Reply(fault=RateLimited(retry_after=600)))

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(stream(make_model("anthropic", fake)), timeout=1.0)

    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_clean_end_without_the_stop_events_yields_no_stop_reason(
    provider: ProviderName, fake: FakeProviders
) -> None:
    # The stream just ends: no error, so only the missing stop reason tells it was cut short.
    fake.script(Reply(text=["Half ", "a sent"], fault=CleanEof()))

    message = merged(await stream(make_model(provider, fake)))

    assert text_of(message.content) == "Half a sent"
    assert STOP_KEY[provider] not in message.response_metadata
    assert message.usage_metadata is None


async def test_openai_raises_a_connection_error_when_the_stream_drops(
    fake: FakeProviders,
) -> None:
    fake.script(Reply(text=["Half ", "a sent"], fault=CutStream(after=1)))
    received: list[AIMessageChunk] = []

    with pytest.raises(openai.APIConnectionError) as caught:
        await stream_into(received, make_model("openai", fake))

    assert isinstance(caught.value, ModelConnectionError)
    assert "".join(text_of(c.content) for c in received) == "Half "
    assert len(fake.requests) == 1  # a started stream is never retried


async def test_anthropic_raises_the_transport_error_unwrapped_when_the_stream_drops(
    fake: FakeProviders,
) -> None:
    # Neither the SDK nor langchain-anthropic wraps it: catching anthropic.APIError or
    # langchain's ModelError misses it.
    fake.script(Reply(text=["Half ", "a sent"], fault=CutStream(after=1)))
    received: list[AIMessageChunk] = []

    with pytest.raises(httpx2.RemoteProtocolError) as caught:
        await stream_into(received, make_model("anthropic", fake))

    assert not isinstance(caught.value, anthropic.APIError | ModelError)
    assert "".join(text_of(c.content) for c in received) == "Half "
    assert len(fake.requests) == 1


async def test_openai_raises_a_bare_api_error_for_an_error_inside_the_stream(
    fake: FakeProviders,
) -> None:
    fake.script(Reply(text=["Half "], fault=StreamError(after=1)))

    with pytest.raises(openai.APIError) as caught:
        await stream(make_model("openai", fake))

    assert type(caught.value) is openai.APIError
    assert not isinstance(caught.value, ModelError)
    assert caught.value.body == {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }


async def test_anthropic_raises_a_status_error_with_status_200_for_an_error_inside_the_stream(
    fake: FakeProviders,
) -> None:
    # An overload reported mid-stream is not an OverloadedError: the response said 200.
    fake.script(Reply(text=["Half "], fault=StreamError(after=1)))

    with pytest.raises(anthropic.APIStatusError) as caught:
        await stream(make_model("anthropic", fake))

    assert type(caught.value) is anthropic.APIStatusError
    assert caught.value.status_code == 200
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
