"""An answer the model did not finish is never taken for a whole one.

The model here stands in for a provider's stream at the LangChain layer: each call answers with
the chunks it is given, ending with or without the stop reason a provider would send.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import agenerate_from_stream
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import build_agent_graph, state_values
from agent.snapshot import CUT_SHORT_TEXT, render_agent_snapshot
from agent.threads import thread_config, thread_key
from demo.tools import demo_tools


class Replies(BaseChatModel):
    """Answers each call with the next reply: its text, then its stop (None: no stop sent)."""

    replies: list[tuple[str, str | None]]
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "replies"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Any | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError  # the graph runs async

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await agenerate_from_stream(self._astream(messages, stop, run_manager, **kwargs))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        text, finish = self.replies[self.calls]
        self.calls += 1
        # A provider's stream opens with an empty chunk (OpenAI's role delta), then the text.
        yield ChatGenerationChunk(message=AIMessageChunk(content=""))
        words = text.split(" ") if text else []
        for i, word in enumerate(words):
            piece = word if i == len(words) - 1 else word + " "
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        if finish is not None:
            meta = {"finish_reason": finish}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", response_metadata=meta))


async def answer(model: Replies) -> tuple[str, str | None]:
    graph = build_agent_graph(model, demo_tools(), InMemorySaver())
    config = thread_config(thread_key(uuid.uuid4(), "default"))
    await graph.ainvoke({"messages": [HumanMessage(content="hi")]}, config)
    snapshot = render_agent_snapshot(state_values(await graph.aget_state(config)))
    assert snapshot.status == "completed"
    return snapshot.text, snapshot.to_json().get("cutShort")


async def test_a_stream_that_ends_without_a_stop_reason_says_it_was_cut_short() -> None:
    text, cut = await answer(Replies(replies=[("The capital of France is", None)]))
    assert cut == "incomplete"
    assert text == "The capital of France is\n\n" + CUT_SHORT_TEXT["incomplete"]


async def test_an_answer_that_hit_the_length_limit_says_so() -> None:
    text, cut = await answer(Replies(replies=[("A long story", "length")]))
    assert (cut, text.endswith(CUT_SHORT_TEXT["length"])) == ("length", True)


async def test_a_call_that_showed_nothing_before_it_broke_is_asked_again() -> None:
    model = Replies(replies=[("", None), ("Paris.", "stop")])
    text, cut = await answer(model)
    assert (text, cut, model.calls) == ("Paris.", None, 2)


async def test_a_whole_answer_is_left_as_it_is() -> None:
    text, cut = await answer(Replies(replies=[("Paris.", "stop")]))
    assert (text, cut) == ("Paris.", None)
