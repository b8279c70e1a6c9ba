"""An assistant's graph: built from the parts Handoff makes for it (the tool loop, or the
assistant's own factory), checked against the contract the quick path and the background rely
on (docs/assistants.md), and compiled once per model in this process."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, get_type_hints

from langchain_core.language_models import BaseChatModel
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

from agent.assistants import Assistant, AssistantDefinitionError
from agent.graph import AGENT_NODE, TOOLS_NODE, AgentGraph, agent_parts, tool_loop
from agent.model import create_model_from_spec
from agent.state import AgentState


def compile_assistant(
    assistant: Assistant,
    model: BaseChatModel,
    *,
    max_tool_rounds: int,
    max_output_tokens: int | None,
) -> AgentGraph:
    """The assistant's graph with `model`, compiled to pause before `tools` and without a
    checkpointer (each turn binds its own). `max_tool_rounds` and `max_output_tokens` are the
    deployment's, for an assistant that sets none of its own. AssistantDefinitionError, naming
    the assistant, for a graph that breaks the contract."""
    parts = agent_parts(
        model,
        assistant.tools,
        instructions=assistant.instructions,
        max_tool_rounds=assistant.max_tool_rounds or max_tool_rounds,
        max_output_tokens=assistant.max_output_tokens or max_output_tokens,
    )
    who = f"Assistant {assistant.id!r}"
    try:
        builder = assistant.graph(parts) if assistant.graph is not None else tool_loop(parts)
    except Exception as exc:
        raise AssistantDefinitionError(f"{who}: its graph factory raised {exc!r}.") from exc
    problem = contract_problem(builder, {t.name for t in assistant.tools})
    if problem is None:
        try:
            graph: AgentGraph = builder.compile(interrupt_before=[TOOLS_NODE])
        except Exception as exc:
            problem = f"its graph does not compile ({exc})"
        else:
            problem = _edges_problem(graph)
    if problem is not None:
        raise AssistantDefinitionError(f"{who}: {problem}.")
    return graph


def contract_problem(builder: object, tool_names: set[str]) -> str | None:
    """What in an uncompiled graph breaks the contract, in a few words; None: nothing."""
    if isinstance(builder, CompiledStateGraph):
        return (
            "its graph factory returned a compiled graph; return the StateGraph, which Handoff"
            " compiles"
        )
    if not isinstance(builder, StateGraph):
        return f"its graph factory returned {type(builder).__name__}, not a StateGraph"
    for node in (AGENT_NODE, TOOLS_NODE):
        if node not in builder.nodes:
            return f"its graph has no node named {node!r}"
    tools = builder.nodes[TOOLS_NODE].runnable
    if not isinstance(tools, ToolNode) or set(tools.tools_by_name) != tool_names:
        return "its 'tools' node is not a ToolNode of its tools (AgentParts.tool_node())"
    hints = get_type_hints(builder.state_schema, include_extras=True)
    for key, hint in get_type_hints(AgentState, include_extras=True).items():
        if hints.get(key) != hint:
            return f"its graph's state has no {key!r} as AgentState has it (extend AgentState)"
    return None


def _edges_problem(graph: AgentGraph) -> str | None:
    edges = {(e.source, e.target) for e in graph.get_graph().edges}
    if (AGENT_NODE, TOOLS_NODE) not in edges:
        return (
            "its graph never goes from 'agent' to 'tools' (a conditional edge needs its"
            " path map, or a Literal return type)"
        )
    return None


class CompiledGraphs:
    """Compiled graphs by assistant and model spec, each handed out bound to a checkpointer.

    Compiling costs milliseconds of CPU (LangGraph inspects every node's code), which a turn
    would otherwise pay before its first token; start-up compiles each assistant's graph once
    (turns/assistants.py). A compiled graph keeps no run state, so one serves every turn; each
    turn binds a shallow copy to its own checkpointer (`graph.copy(update={"checkpointer": ...})`).
    """

    def __init__(self, *, limit: int = 32) -> None:
        self._limit = limit
        # Values keep the assistant alive, so the id in a key cannot be reused while cached.
        self._graphs: OrderedDict[
            tuple[int, str, tuple[int, int | None]], tuple[Assistant, AgentGraph]
        ] = OrderedDict()

    def graph(
        self,
        assistant: Assistant,
        model_spec: dict[str, Any],
        *,
        max_tool_rounds: int,
        max_output_tokens: int | None = None,
        model_options: Mapping[str, Any] | None = None,
    ) -> AgentGraph:
        """The assistant's graph for `model_spec`, its model made with `model_options` (a key,
        an endpoint)."""
        key = (
            id(assistant),
            json.dumps([model_spec, model_options or {}], sort_keys=True, default=str),
            (max_tool_rounds, max_output_tokens),
        )
        cached = self._graphs.get(key)
        if cached is None:
            made = create_model_from_spec(model_spec, model_options)
            graph = compile_assistant(
                assistant,
                made,
                max_tool_rounds=max_tool_rounds,
                max_output_tokens=max_output_tokens,
            )
            cached = (assistant, graph)
            self._graphs[key] = cached
            if len(self._graphs) > self._limit:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        return cached[1]
