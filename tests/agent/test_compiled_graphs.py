"""Compiled graphs shared across turns: each turn still reads and writes only its own saver,
and gets its own assistant's graph."""

from __future__ import annotations

import asyncio
import uuid

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from agent.assistant_graph import CompiledGraphs
from agent.assistants import Assistant
from agent.graph import TOOLS_NODE, AgentGraph, state_values
from agent.model import model_spec
from agent.state import AgentState
from agent.threads import thread_config, thread_key
from demo.tools import demo_tools

SPEC = model_spec("scripted", token_delay_ms=0)
HELPER = Assistant(id="default", name="Helper", tools=demo_tools())


def bound(graphs: CompiledGraphs, assistant: Assistant, saver: InMemorySaver) -> AgentGraph:
    graph = graphs.graph(assistant, SPEC, max_tool_rounds=8)
    return graph.copy(update={"checkpointer": saver})


def said(text: str) -> AgentState:
    return {"messages": [HumanMessage(content=text)]}


def new_thread() -> RunnableConfig:
    return thread_config(thread_key(uuid.uuid4(), "default"))


async def test_concurrent_turns_on_one_compiled_graph_keep_their_own_checkpoints() -> None:
    graphs = CompiledGraphs()
    turns = [(InMemorySaver(), new_thread(), "first chat"), (InMemorySaver(), new_thread(), "2")]

    # GIVEN two turns at once, each with its own saver, through the same cache
    async def turn(saver: InMemorySaver, config: RunnableConfig, text: str) -> None:
        await bound(graphs, HELPER, saver).ainvoke(said(text), config)

    await asyncio.gather(*(turn(*t) for t in turns))

    # THEN each saver holds its own turn and nothing of the other
    for saver, config, text in turns:
        state = await bound(graphs, HELPER, saver).aget_state(config)
        messages = state_values(state)["messages"]
        assert [m.content for m in messages] == [text, f'You said: "{text}"']
        assert {c.config["configurable"]["thread_id"] async for c in saver.alist(None)} == {
            config["configurable"]["thread_id"]
        }


async def test_a_turn_gets_its_own_assistants_tools() -> None:
    graphs = CompiledGraphs()
    config = new_thread()
    talker = Assistant(id="talker", name="Talker")

    # GIVEN the same message to an assistant with the demo tools and to one without tools
    with_tools = bound(graphs, HELPER, InMemorySaver())
    await with_tools.ainvoke(said("/calc 1+1"), config)
    without = bound(graphs, talker, InMemorySaver())
    await without.ainvoke(said("/calc 1+1"), config)

    # THEN only the first pauses before a tool; the second just answers
    assert TOOLS_NODE in (await with_tools.aget_state(config)).next
    state = await without.aget_state(config)
    assert state.next == ()
    last = state_values(state)["messages"][-1]
    assert isinstance(last, AIMessage)
    assert not last.tool_calls


def test_each_assistant_and_model_is_compiled_once() -> None:
    graphs = CompiledGraphs()
    first = graphs.graph(HELPER, SPEC, max_tool_rounds=8)
    assert graphs.graph(HELPER, SPEC, max_tool_rounds=8) is first
    other = Assistant(id="default", name="Helper", tools=demo_tools())
    assert graphs.graph(other, SPEC, max_tool_rounds=8) is not first
    assert (
        graphs.graph(HELPER, model_spec("scripted", token_delay_ms=5), max_tool_rounds=8)
        is not first
    )
