"""A definition Handoff cannot run is refused with one sentence that names the assistant and
the problem: ids, names, tools, limits, the graph a factory returns, the ASSISTANTS reference."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode
from typing_extensions import TypedDict

from agent.assistant_graph import compile_assistant
from agent.assistants import (
    Assistant,
    AssistantDefinitionError,
    Assistants,
    UnknownAssistant,
    load_assistants,
)
from agent.graph import AgentParts, route_after_agent, tool_loop
from agent.model import ScriptedChatModel
from agent.state import AgentState
from demo.tools import ask_user, calc
from tests.assistants_example import PLANNER, planned_graph


def compiled(assistant: Assistant) -> Any:
    return compile_assistant(
        assistant, ScriptedChatModel(), max_tool_rounds=8, max_output_tokens=None
    )


@pytest.mark.parametrize(
    ("assistants", "says"),
    [
        ([], "ASSISTANTS names no assistant"),
        (["helper"], "'helper', which is not an Assistant"),
        ([Assistant(id="a:b", name="A")], "Assistant 'a:b': an id is 1 to 64 letters"),
        ([Assistant(id="", name="A")], "Assistant '': an id is 1 to 64"),
        ([Assistant(id="a", name=" ")], "Assistant 'a' has no name"),
        (
            [Assistant(id="a", name="A"), Assistant(id="a", name="B")],
            "Two assistants have the id 'a'",
        ),
        (
            [Assistant(id="a", name="A", tools=[calc, calc])],
            "Assistant 'a' has two tools named 'calc'",
        ),
        (
            [Assistant(id="a", name="A", tools=["calc"])],  # type: ignore[list-item]
            "Assistant 'a': 'calc' is not a LangChain tool",
        ),
        (
            [Assistant(id="a", name="A", max_tool_rounds=0)],
            "max_tool_rounds must be positive, not 0",
        ),
        ([Assistant(id="a", name="A", graph="x")], "Assistant 'a': graph must be a function"),  # type: ignore[arg-type]
        (
            [Assistant(id="a", name="A", starters="Say hi")],
            "Assistant 'a': starters must be a list of messages, none blank",
        ),
        (
            [Assistant(id="a", name="A", starters=["Say hi", " "])],
            "Assistant 'a': starters must be a list of messages, none blank",
        ),
    ],
)
def test_a_definition_that_cannot_run_is_refused_in_one_sentence(
    assistants: list[Any], says: str
) -> None:
    with pytest.raises(AssistantDefinitionError) as refused:
        Assistants(assistants)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_first_assistant_is_the_default_and_an_unknown_id_is_no_assistant() -> None:
    first, second = Assistant(id="a", name="A"), Assistant(id="b", name="B")
    assistants = Assistants([first, second])
    assert assistants.pick(None) is first is assistants.default
    assert assistants.pick("b") is second
    with pytest.raises(UnknownAssistant):
        assistants.pick("c")


class Unrelated(TypedDict):
    messages: list[Any]


def graph_without(node: str) -> Any:
    def factory(parts: AgentParts) -> Any:
        builder = tool_loop(parts)
        fresh = StateGraph(AgentState)
        for name, spec in builder.nodes.items():
            if name != node:
                fresh.add_node(name, spec.runnable)
        fresh.add_edge(START, "agent" if node != "agent" else "tools")
        return fresh

    return factory


def other_state(parts: AgentParts) -> Any:
    builder = StateGraph(Unrelated)
    builder.add_node("agent", lambda state: {})
    builder.add_node("tools", parts.tool_node())
    builder.add_edge(START, "agent")
    return builder


def no_path_map(parts: AgentParts) -> Any:
    async def not_literal(state: AgentState) -> str:  # no path map to read from a `str`
        return await route_after_agent(state)

    builder = StateGraph(AgentState)
    builder.add_node("agent", parts.agent)
    builder.add_node("tools", parts.tool_node())
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", not_literal)
    builder.add_edge("tools", "agent")
    return builder


def raising(parts: AgentParts) -> Any:
    raise RuntimeError("no such index")


def other_tools(parts: AgentParts) -> Any:
    builder = StateGraph(AgentState)
    builder.add_node("agent", parts.agent)
    builder.add_node("tools", ToolNode([ask_user]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route_after_agent)
    return builder


@pytest.mark.parametrize(
    ("factory", "says"),
    [
        (
            lambda parts: tool_loop(parts).compile(),
            "returned a compiled graph; return the StateGraph",
        ),
        (lambda parts: None, "returned NoneType, not a StateGraph"),
        (graph_without("agent"), "its graph has no node named 'agent'"),
        (graph_without("tools"), "its graph has no node named 'tools'"),
        (other_tools, "its 'tools' node is not a ToolNode of its tools"),
        (other_state, "its graph's state has no 'messages' as AgentState has it"),
        (no_path_map, "never goes from 'agent' to 'tools'"),
        (raising, "its graph factory raised RuntimeError('no such index')"),
    ],
)
def test_a_graph_that_breaks_the_contract_is_refused_at_start(factory: Any, says: str) -> None:
    assistant = Assistant(id="odd", name="Odd", tools=[calc], graph=factory)
    with pytest.raises(AssistantDefinitionError) as refused:
        compiled(assistant)
    assert str(refused.value).startswith("Assistant 'odd': ")
    assert says in str(refused.value)


def test_a_graph_that_keeps_the_contract_compiles_to_pause_before_its_tools() -> None:
    graph = compiled(PLANNER)
    assert set(graph.get_graph().nodes) >= {"plan", "agent", "tools"}
    assert graph.interrupt_before_nodes == ["tools"]
    assert PLANNER.graph is planned_graph


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        ("tests.assistants_example", "must be 'module:attribute'"),
        (
            "no_such_module:ASSISTANTS",
            "module 'no_such_module' cannot be imported .* put the folder that holds it on"
            " PYTHONPATH",
        ),
        ("tests.assistants_example:MISSING", "has no 'MISSING'"),
        ("tests.assistants_example:PLANNER", "must be a sequence of Assistant, not Assistant"),
    ],
)
def test_a_wrong_assistants_reference_is_refused(reference: str, says: str) -> None:
    with pytest.raises(AssistantDefinitionError, match=says):
        load_assistants(reference)


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("def broken(:\n", r"cannot be imported \(SyntaxError: .*line 1\)\)\.$"),
        ("raise RuntimeError('no key')\n", r"\(RuntimeError: no key at .*\.py:1\)\.$"),
        ("import no_such_dependency\n", r"\(No module named 'no_such_dependency'\)\.$"),
    ],
)
def test_a_module_that_fails_to_import_is_refused_in_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, says: str
) -> None:
    name = f"assistants_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssistantDefinitionError, match=says) as refused:
        load_assistants(f"{name}:ASSISTANTS")
    assert "\n" not in str(refused.value)


def test_the_reference_loads_the_assistants_it_names() -> None:
    assistants = load_assistants("tests.assistants_example:ASSISTANTS")
    assert [a.id for a in assistants] == ["default", "calculator", "planner"]
