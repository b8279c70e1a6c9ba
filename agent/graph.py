"""The ReAct agent graph shared by the quick path and the background function."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from langchain_core.language_models import BaseChatModel
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
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import StateSnapshot

from agent.answers import answer
from agent.state import SCHEMA_VERSION, AgentState, CutShort, ToolInvocation
from agent.text import visible_text

AGENT_NODE = "agent"
TOOLS_NODE = "tools"
DEFAULT_MAX_TOOL_ROUNDS = 8
ROUND_LIMIT_TEXT = "I stopped here because this answer needed too many tool steps."
BUDGET_TEXT = "I stopped here because this answer used up its length budget."
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


def model_input(state: AgentState, instructions: str = "") -> list[AnyMessage]:
    """What the model is sent: the thread, after one system message with the assistant's
    `instructions` (its system prompt) and the user's instruction for this turn, if they gave
    one. It leads, where every provider takes a system message (Anthropic's, one only), and it
    is never stored in the thread."""
    notes = [instructions] if instructions else []
    if instruction := state.get("instruction"):
        notes.append(INSTRUCTION_TEXT.format(instruction=instruction))
    messages = list(state["messages"])
    return [SystemMessage(content="\n\n".join(notes)), *messages] if notes else messages


class AgentNode(Protocol):
    """Handoff's `agent` node: one model call on the state, its update returned."""

    async def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]: ...


@dataclass(frozen=True)
class AgentParts:
    """What Handoff makes for an assistant, for its graph (`tool_loop`, or the assistant's own
    factory) to be built from: the model, made for this assistant; its tools and instructions;
    its limits; and `agent`, Handoff's own agent node (the model call with the instructions,
    the round and output budgets, and answers cut short), for a custom graph to reuse."""

    model: BaseChatModel
    tools: Sequence[BaseTool]
    instructions: str
    max_tool_rounds: int
    max_output_tokens: int | None
    agent: AgentNode

    def tool_node(self) -> ToolNode:
        """The `tools` node of the assistant's tools."""
        return ToolNode(list(self.tools), handle_tool_errors=True)


# What an assistant's `graph` is: its parts in, an uncompiled graph out (docs/assistants.md).
GraphFactory = Callable[[AgentParts], "StateGraph[Any, Any, Any, Any]"]


def agent_parts(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    instructions: str = "",
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
    max_output_tokens: int | None = None,
) -> AgentParts:
    node = agent_node(
        model,
        tools,
        instructions=instructions,
        max_tool_rounds=max_tool_rounds,
        max_output_tokens=max_output_tokens,
    )
    return AgentParts(model, tools, instructions, max_tool_rounds, max_output_tokens, node)


def agent_node(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    instructions: str,
    max_tool_rounds: int,
    max_output_tokens: int | None,
) -> AgentNode:
    """The `agent` node: one model call. A turn gets at most `max_tool_rounds` rounds of
    tools, and none more once its model calls have written `max_output_tokens` (None: no
    budget)."""
    bound = model.bind_tools(tools) if tools else model

    async def agent(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        turn = current_turn(state["messages"])
        rounds = sum(1 for m in turn if isinstance(m, AIMessage) and m.tool_calls)
        response, cut = await answer(bound, model_input(state, instructions), config)
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

    return agent


async def route_after_agent(state: AgentState) -> Literal["tools", "__end__"]:
    """`tools` when the last answer calls tools, else the end. A coroutine: LangGraph runs a
    plain function on a worker thread in an async graph."""
    last = state["messages"][-1]
    if isinstance(last, AIMessage) and last.tool_calls:
        return "tools"
    return "__end__"


def tool_loop(parts: AgentParts) -> StateGraph[AgentState, None, AgentState, AgentState]:
    """The graph of an assistant without a factory of its own: `agent`, then `tools` while
    the model calls them."""
    builder = StateGraph(AgentState)
    builder.add_node(AGENT_NODE, parts.agent)
    builder.add_node(TOOLS_NODE, parts.tool_node())
    builder.add_edge(START, AGENT_NODE)
    builder.add_conditional_edges(AGENT_NODE, route_after_agent, [TOOLS_NODE, END])
    builder.add_edge(TOOLS_NODE, AGENT_NODE)
    return builder


def build_agent_graph(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    interrupt_before_tools: bool = True,
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
    max_output_tokens: int | None = None,
    instructions: str = "",
) -> AgentGraph:
    """The tool loop of `model` and `tools`, compiled; pauses before `tools` unless told
    otherwise."""
    parts = agent_parts(
        model,
        tools,
        instructions=instructions,
        max_tool_rounds=max_tool_rounds,
        max_output_tokens=max_output_tokens,
    )
    return tool_loop(parts).compile(
        checkpointer=checkpointer,
        interrupt_before=[TOOLS_NODE] if interrupt_before_tools else None,
    )


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


def state_values(state: StateSnapshot) -> AgentState:
    return cast(AgentState, state.values)


async def stream_agent_text(
    graph: AgentGraph, graph_input: AgentState | None, config: RunnableConfig
) -> AsyncGenerator[str]:
    """Run the graph (to its next pause or the end) and yield the model's text as it streams.

    Saved once, as the run pauses or ends (an error or a cancel too), not at every superstep: its
    saver is the turn's in-memory copy, of which only the newest checkpoint is stored
    (infra/store/checkpoints.py), and each save before the model answers would encode the whole
    history again ahead of the first token."""
    async for chunk, meta in graph.astream(
        graph_input, config, stream_mode="messages", durability="exit"
    ):
        if (
            isinstance(meta, dict)
            and meta.get("langgraph_node") == AGENT_NODE
            and isinstance(chunk, AIMessageChunk)
            and (text := visible_text(chunk))
        ):
            yield text
