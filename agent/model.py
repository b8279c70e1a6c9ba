"""Chat models: the scripted offline default, or any provider through init_chat_model."""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    UsageMetadata,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

SCRIPTED = "scripted"
_TOOL_LINE = re.compile(r"^/(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:[ \t]+(?P<args>.*))?$")
# Long tool results are quoted in full in the summary; the words are streamed one by one.
QUOTE_LIMIT = 100_000


ROUND_BREAK = "/then"


def parse_tool_lines(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Each `/<tool> <args>` line: args are a JSON object if they start with `{`, else input."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for line in text.splitlines():
        match = _TOOL_LINE.match(line.strip())
        if not match or line.strip() == ROUND_BREAK:
            continue
        raw = (match.group("args") or "").strip()
        args: dict[str, Any]
        if raw.startswith("{"):
            try:
                parsed = json.loads(raw)
            except json.JSONDecodeError:
                parsed = None
            args = parsed if isinstance(parsed, dict) else {"input": raw}
        else:
            args = {"input": raw}
        calls.append((match.group("name"), args))
    return calls


def sentence(text: str) -> str:
    """`text` ending in one full stop, not two when a quoted result already ends in one."""
    return text if text.endswith((".", "!", "?")) else text + "."


def parse_tool_rounds(text: str, known: set[str]) -> list[list[tuple[str, dict[str, Any]]]]:
    """Tool lines grouped into rounds: a `/then` line starts the next round."""
    rounds: list[list[tuple[str, dict[str, Any]]]] = []
    current: list[str] = []
    for line in [*text.splitlines(), ROUND_BREAK]:
        if line.strip() != ROUND_BREAK:
            current.append(line)
            continue
        calls = [c for c in parse_tool_lines("\n".join(current)) if c[0] in known]
        if calls:
            rounds.append(calls)
        current = []
    return rounds


class ScriptedChatModel(BaseChatModel):
    """A deterministic model that streams word by word. `/tool args` lines become tool calls."""

    token_delay_ms: float = 15.0

    @property
    def _llm_type(self) -> str:
        return SCRIPTED

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Any | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self.bind(tool_names=names, **kwargs)

    def _reply(
        self, messages: list[BaseMessage], tool_names: Sequence[str] | None
    ) -> tuple[str, list[dict[str, Any]]]:
        """(text, tool calls) for the conversation so far."""
        human_at = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
            None,
        )
        human = messages[human_at] if human_at is not None else None
        text = str(human.content) if human else ""
        turn = messages[human_at + 1 :] if human_at is not None else messages
        rounds_done = sum(1 for m in turn if isinstance(m, AIMessage) and m.tool_calls)
        rounds = parse_tool_rounds(text, set(tool_names or []))
        tail: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            tail.append(message)
        found = " ".join(
            sentence(f"{m.name or 'tool'} returned {str(m.content)[:QUOTE_LIMIT]!s}")
            for m in reversed(tail)
        )
        # What a system message says is echoed, so that tests see what the model was told.
        notes = [str(m.content) for m in messages if isinstance(m, SystemMessage)]
        noted = f" (Noted: {notes[-1]})" if notes else ""
        if rounds_done >= len(rounds):
            if tail:
                return "Here is what I found: " + found + noted, []
            return f'You said: "{text}"' + noted, []
        calls = rounds[rounds_done]
        names = ", ".join(dict.fromkeys(name for name, _ in calls))
        seed = hashlib.sha256(f"{human.id if human else ''}:{text}".encode()).hexdigest()
        tool_calls = [
            {"name": name, "args": args, "id": f"call_{seed[:12]}_{len(messages)}_{i}"}
            for i, (name, args) in enumerate(calls)
        ]
        if tail:
            return f"So far: {found} Next, let me use {names}.{noted}", tool_calls
        return f"Let me use {names} for that.{noted}", tool_calls

    def _chunks(
        self, messages: list[BaseMessage], tool_names: Sequence[str] | None
    ) -> Iterator[AIMessageChunk]:
        text, tool_calls = self._reply(messages, tool_names)
        words = text.split(" ")
        for i, word in enumerate(words):
            yield AIMessageChunk(content=word if i == len(words) - 1 else word + " ")
        # The last chunk says why the model stopped and what it used, as a provider's does.
        yield AIMessageChunk(
            content="",
            tool_call_chunks=[
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(tool_calls)
            ],
            response_metadata={"finish_reason": "tool_calls" if tool_calls else "stop"},
            usage_metadata=_usage(messages, words),
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text, tool_calls = self._reply(messages, kwargs.get("tool_names"))
        finish = {"finish_reason": "tool_calls" if tool_calls else "stop"}
        usage = _usage(messages, text.split(" "))
        message = AIMessage(
            content=text, tool_calls=tool_calls, response_metadata=finish, usage_metadata=usage
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages, kwargs.get("tool_names")):
            if self.token_delay_ms and chunk.content:
                await asyncio.sleep(self.token_delay_ms / 1000)
            generation = ChatGenerationChunk(message=chunk)
            if run_manager and isinstance(chunk.content, str):
                await run_manager.on_llm_new_token(chunk.content, chunk=generation)
            yield generation

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages, kwargs.get("tool_names")):
            generation = ChatGenerationChunk(message=chunk)
            if run_manager and isinstance(chunk.content, str):
                run_manager.on_llm_new_token(chunk.content, chunk=generation)
            yield generation


# The providers whose LangChain packages the project installs as extras (pyproject.toml).
PROVIDER_EXTRAS = frozenset({"openai", "anthropic"})


def _usage(messages: list[BaseMessage], words: list[str]) -> UsageMetadata:
    """Words counted as tokens: what the conversation sent, and what the reply said."""
    sent = sum(len(str(m.content).split()) for m in messages)
    said = len([w for w in words if w])
    return {"input_tokens": sent, "output_tokens": said, "total_tokens": sent + said}


class ModelUnavailable(ValueError):
    """MODEL cannot be used here: its message says what to set or install."""


def create_model(
    name: str, *, token_delay_ms: float = 15.0, options: Mapping[str, Any] | None = None
) -> BaseChatModel:
    """`scripted`, or `provider:model` for a real provider via langchain's init_chat_model,
    made with `options` (its key and endpoint, say)."""
    if name == SCRIPTED:
        return ScriptedChatModel(token_delay_ms=token_delay_ms)
    provider = _provider(name, "MODEL")
    from langchain.chat_models import init_chat_model

    kwargs = dict(options or {})
    if provider == "openai":
        # OpenAI reports a streamed call's usage only when asked; the others always do.
        kwargs["stream_usage"] = True
    # init_chat_model's overloads cannot see a model name through **kwargs: it returns one.
    made: BaseChatModel = init_chat_model(name, **kwargs)
    return made


def _provider(name: str, setting: str) -> str:
    provider, _, model = name.partition(":")
    if not provider or not model:
        raise ModelUnavailable(
            f"{setting} must be 'scripted' or 'provider:model' (openai:gpt-4o-mini,"
            f" anthropic:claude-sonnet-4-5), not {name!r}."
        )
    return provider


def check_model(
    name: str, options: Mapping[str, Any] | None = None, *, setting: str = "MODEL"
) -> None:
    """Make the model `name` once, so that a wrong name, a missing provider package or a
    missing key stops the process at start (and the provider's import happens there, not in a
    turn). `setting` is where the name came from, for the message: MODEL, or an assistant's
    own `model`."""
    if name != SCRIPTED:
        _known_provider(_provider(name, setting), name, setting)
    try:
        create_model(name, options=options)
    except ImportError as exc:
        provider = name.partition(":")[0]
        # LangChain's error names the missing module in its cause, and advises pip.
        package = str(getattr(exc.__cause__, "name", None) or "").partition(".")[0]
        if provider in PROVIDER_EXTRAS:
            fix = f": run `uv sync --extra {provider}` (or `uv sync --all-extras`)"
        elif package:
            package = package.replace("_", "-")
            fix = f", {package}, which this project does not depend on: `uv add {package}`"
        else:
            fix = f": this project ships no extra for it; {exc}"
        raise ModelUnavailable(f"{setting}={name} needs its provider's package{fix}.") from exc
    except Exception as exc:
        said = " ".join(str(exc).split())  # the provider's words, on one line
        raise ModelUnavailable(f"{setting}={name} cannot be used: {said}") from exc


def _known_provider(provider: str, name: str, setting: str) -> None:
    """A provider LangChain's (private) list lacks is refused in one sentence, nearest given."""
    from langchain.chat_models import base

    known: dict[str, object] | None = getattr(base, "_BUILTIN_PROVIDERS", None)
    if known is not None and provider not in known:
        near = difflib.get_close_matches(provider, list(known), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else "."
        raise ModelUnavailable(f"{setting}={name}: LangChain has no provider {provider!r}{hint}")


def model_spec(name: str, *, token_delay_ms: float) -> dict[str, Any]:
    """The model spec a turn carries (its key in the handoff event's data is `modelConfig`), so
    the background rebuilds the same model. Names and knobs only: credentials come from the
    settings where the model runs."""
    spec: dict[str, Any] = {"model": name}
    if name == SCRIPTED:
        spec["tokenDelayMs"] = token_delay_ms
    return spec


def create_model_from_spec(
    spec: dict[str, Any], options: Mapping[str, Any] | None = None
) -> BaseChatModel:
    return create_model(
        str(spec.get("model", SCRIPTED)),
        token_delay_ms=float(spec.get("tokenDelayMs", 15)),
        options=options,
    )
