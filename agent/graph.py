"""The ReAct agent graph shared by the quick path and the background function."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, cast

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import StateSnapshot

from agent.model import create_model_from_spec
from agent.state import SCHEMA_VERSION, AgentState, CutShort, ToolInvocation
from agent.text import visible_text

AGENT_NODE = "agent"
TOOLS_NODE = "tools"
DEFAULT_MAX_TOOL_ROUNDS = 8
ROUND_LIMIT_TEXT = "I stopped here because this answer needed too many tool steps."
BUDGET_TEXT = "I stopped here because this answer used up its length budget."
# A model call that ended without finishing and showed nothing is asked again this often.
MODEL_RETRIES_UNSEEN = 2
# How providers say an answer is whole (OpenAI's finish_reason, Anthropic's stop_reason,
# Gemini's finish_reason, Bedrock's stopReason), and how they say it was cut.
FINISHED = frozenset(
    {"stop", "tool_calls", "function_call", "end_turn", "tool_use", "stop_sequence", "pause_turn",
     "STOP", "FINISH_REASON_UNSPECIFIED"}
)  # fmt: skip
CUT: dict[str, CutShort] = {
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "SAFETY": "content_filter",
    "guardrail_intervened": "content_filter",
}

AgentGraph = CompiledStateGraph[AgentState, None, AgentState, AgentState]


def current_turn(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages since the human message that began the turn: a message steered into a
    running turn (`steered_message`) is part of that turn, not the start of another."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage) and not is_steered(messages[i]):
            return list(messages[i + 1 :])
    return list(messages)


def steered_message(message_id: str, content: str) -> HumanMessage:
    """A user's message that joined a running turn (multitaskStrategy `steer`)."""
    return HumanMessage(content=content, id=message_id, additional_kwargs={"steered": True})


def is_steered(message: BaseMessage) -> bool:
    return bool(message.additional_kwargs.get("steered"))


def pending_tool_calls(messages: Sequence[AnyMessage]) -> list[ToolCall]:
    """Tool calls of the last AI message that have no ToolMessage yet."""
    last_ai = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if last_ai is None:
        return []
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [c for c in last_ai.tool_calls if c["id"] not in answered]


UNANSWERED_CALL_TEXT = "Not run: the conversation moved on before this call ran."


def unanswered_calls_closed(messages: Sequence[AnyMessage]) -> list[ToolMessage]:
    """A ToolMessage for each call of the last AI message that never got one (its job was
    canceled): providers refuse a conversation with a call left unanswered."""
    return [
        ToolMessage(content=UNANSWERED_CALL_TEXT, tool_call_id=c["id"], name=c["name"])
        for c in pending_tool_calls(messages)
    ]


INSTRUCTION_TEXT = (
    "The user paused this answer and, resuming it, gave this instruction for the rest of it:"
    " {instruction}"
)


def model_input(state: AgentState) -> list[AnyMessage]:
    """What the model is sent: the thread, after a system note with the user's instruction
    for this turn, if they gave one (leading, where every provider takes a system message)."""
    messages = list(state["messages"])
    if instruction := state.get("instruction"):
        note = SystemMessage(content=INSTRUCTION_TEXT.format(instruction=instruction))
        return [note, *messages]
    return messages


def build_agent_graph(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    interrupt_before_tools: bool = True,
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
    max_output_tokens: int | None = None,
) -> AgentGraph:
    """Nodes `agent` and `tools`; pauses before `tools` unless told otherwise. A turn gets at
    most `max_tool_rounds` rounds of tools, and none more once its model calls have written
    `max_output_tokens` (None: no budget)."""
    bound = model.bind_tools(tools) if tools else model

    async def agent(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        turn = current_turn(state["messages"])
        rounds = sum(1 for m in turn if isinstance(m, AIMessage) and m.tool_calls)
        response, cut = await _answer(bound, model_input(state), config)
        if cut is not None:
            # Its tool calls may be cut too: none of them runs. What was shown stays, and the
            # snapshot says in plain words that the answer is not whole.
            return _last_answer(AIMessage(content=visible_text(response), id=response.id), cut)
        calls = getattr(response, "tool_calls", None) or []
        spent = output_tokens([*turn, response])
        over_budget = max_output_tokens is not None and spent >= max_output_tokens
        if calls and (rounds >= max_tool_rounds or over_budget):
            # The model still answers after the last allowed round; only another round of
            # tools is refused. Its streamed text stays, so the message matches what was shown.
            limit = BUDGET_TEXT if rounds < max_tool_rounds else ROUND_LIMIT_TEXT
            text = f"{visible_text(response)}\n\n{limit}".lstrip()
            return _last_answer(AIMessage(content=text), None)
        invocations: list[ToolInvocation] = [
            {"id": c["id"], "name": c["name"], "args": c["args"], "status": "pending"}
            for c in calls
            if c.get("id")
        ]
        return {
            "messages": [response],
            "status": "needs_tool_handoff" if calls else "completed",
            "tool_invocations": invocations,
            "cut_short": None,
            "schema_version": SCHEMA_VERSION,
        }

    def route(state: AgentState) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return TOOLS_NODE
        return END

    builder = StateGraph(AgentState)
    builder.add_node(AGENT_NODE, agent)
    builder.add_node(TOOLS_NODE, ToolNode(list(tools), handle_tool_errors=True))
    builder.add_edge(START, AGENT_NODE)
    builder.add_conditional_edges(AGENT_NODE, route, [TOOLS_NODE, END])
    builder.add_edge(TOOLS_NODE, AGENT_NODE)
    return builder.compile(
        checkpointer=checkpointer,
        interrupt_before=[TOOLS_NODE] if interrupt_before_tools else None,
    )


class CompiledGraphs:
    """Compiled graphs by model spec and tool set, each handed out bound to a checkpointer.

    Compiling costs milliseconds of CPU (LangGraph inspects every node's code), which a turn
    would otherwise pay before its first token. A compiled graph keeps no run state, so one per
    model spec serves every turn; each turn gets a shallow copy holding its own checkpointer.
    """

    def __init__(self, *, limit: int = 32) -> None:
        self._limit = limit
        # Values keep the tools alive, so the ids in a key cannot be reused while it is cached.
        self._graphs: OrderedDict[
            tuple[str, tuple[int, int | None], tuple[int, ...]], tuple[Any, AgentGraph]
        ] = OrderedDict()

    def bound(
        self,
        model_spec: dict[str, Any],
        tools: Sequence[BaseTool],
        checkpointer: BaseCheckpointSaver[Any],
        *,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        max_output_tokens: int | None = None,
        model_options: Mapping[str, Any] | None = None,
    ) -> AgentGraph:
        """The graph for `model_spec` (its model made with `model_options`: a key, an
        endpoint) and `tools`, bound to `checkpointer`."""
        key = (
            json.dumps([model_spec, model_options or {}], sort_keys=True, default=str),
            (max_tool_rounds, max_output_tokens),
            tuple(id(t) for t in tools),
        )
        cached = self._graphs.get(key)
        if cached is None:
            model = create_model_from_spec(model_spec, model_options)
            graph = build_agent_graph(
                model,
                tools,
                None,
                max_tool_rounds=max_tool_rounds,
                max_output_tokens=max_output_tokens,
            )
            cached = (list(tools), graph)
            self._graphs[key] = cached
            if len(self._graphs) > self._limit:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        return cached[1].copy(update={"checkpointer": checkpointer})


def output_tokens(messages: Sequence[BaseMessage]) -> int:
    """What the model calls among `messages` wrote, as their providers counted it."""
    return sum(
        m.usage_metadata["output_tokens"]
        for m in messages
        if isinstance(m, AIMessage) and m.usage_metadata
    )


def out_of_time(shown: str) -> dict[str, Any]:
    """The agent node's update when its time ran out mid-answer: what was shown is the answer,
    marked as cut short, and no tool it may have been about to call runs."""
    return _last_answer(AIMessage(content=shown), "time")


def _last_answer(message: AIMessage, cut: CutShort | None) -> dict[str, Any]:
    """The agent node's update for an answer that calls no tool, whatever the model asked."""
    return {
        "messages": [message],
        "status": "completed",
        "cut_short": cut,
        "schema_version": SCHEMA_VERSION,
    }


async def _answer(
    bound: Runnable[LanguageModelInput, BaseMessage],
    messages: list[AnyMessage],
    config: RunnableConfig,
) -> tuple[BaseMessage, CutShort | None]:
    """The model's answer, and why it is not whole (None: it is)."""
    response = await bound.ainvoke(messages, config)
    cut = cut_short(response)
    for _ in range(MODEL_RETRIES_UNSEEN):
        if cut is None or visible_text(response):
            break
        # Nothing of it reached anyone: ask again rather than answer with nothing.
        response = await bound.ainvoke(messages, config)
        cut = cut_short(response)
    return response, cut


def cut_short(message: BaseMessage) -> CutShort | None:
    """Why the model's answer is not whole, or None when the provider said it finished."""
    meta = message.response_metadata
    stop = meta.get("finish_reason") or meta.get("stop_reason") or meta.get("stopReason")
    if stop is None:
        return "incomplete"  # the stream ended without the provider saying why
    return None if stop in FINISHED else CUT.get(str(stop))


def state_values(state: StateSnapshot) -> AgentState:
    return cast(AgentState, state.values)


async def stream_agent_text(
    graph: AgentGraph, graph_input: AgentState | None, config: RunnableConfig
) -> AsyncGenerator[str]:
    """Run the graph (to its next pause or the end) and yield the model's text as it streams."""
    async for chunk, meta in graph.astream(graph_input, config, stream_mode="messages"):
        if (
            isinstance(meta, dict)
            and meta.get("langgraph_node") == AGENT_NODE
            and isinstance(chunk, AIMessageChunk)
            and (text := visible_text(chunk))
        ):
            yield text
