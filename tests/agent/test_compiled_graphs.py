"""Compiled graphs shared across turns: each turn still reads and writes only its own saver."""

from __future__ import annotations

import asyncio
import uuid

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import TOOLS_NODE, CompiledGraphs, state_values
from agent.model import model_spec
from agent.state import AgentState
from agent.threads import thread_config, thread_key
from agent.tools import demo_tools

SPEC = model_spec("scripted", token_delay_ms=0)


def said(text: str) -> AgentState:
    return {"messages": [HumanMessage(content=text)]}


def new_thread() -> RunnableConfig:
    return thread_config(thread_key(uuid.uuid4()))


async def test_concurrent_turns_on_one_compiled_graph_keep_their_own_checkpoints() -> None:
    graphs = CompiledGraphs()
    tools = demo_tools()
    turns = [(InMemorySaver(), new_thread(), "first chat"), (InMemorySaver(), new_thread(), "2")]

    # GIVEN two turns at once, each with its own saver, through the same cache
    async def turn(saver: InMemorySaver, config: RunnableConfig, text: str) -> None:
        await graphs.bound(SPEC, tools, saver).ainvoke(said(text), config)

    await asyncio.gather(*(turn(*t) for t in turns))

    # THEN each saver holds its own turn and nothing of the other
    for saver, config, text in turns:
        state = await graphs.bound(SPEC, tools, saver).aget_state(config)
        messages = state_values(state)["messages"]
        assert [m.content for m in messages] == [text, f'You said: "{text}"']
        assert {c.config["configurable"]["thread_id"] async for c in saver.alist(None)} == {
            config["configurable"]["thread_id"]
        }


async def test_a_turn_gets_the_tools_it_asked_for() -> None:
    graphs = CompiledGraphs()
    config = new_thread()

    # GIVEN the same message through a graph with the demo tools and one without tools
    with_tools = graphs.bound(SPEC, demo_tools(), InMemorySaver())
    await with_tools.ainvoke(said("/calc 1+1"), config)
    without = graphs.bound(SPEC, [], InMemorySaver())
    await without.ainvoke(said("/calc 1+1"), config)

    # THEN only the first pauses before a tool; the second just answers
    assert TOOLS_NODE in (await with_tools.aget_state(config)).next
    state = await without.aget_state(config)
    assert state.next == ()
    last = state_values(state)["messages"][-1]
    assert isinstance(last, AIMessage)
    assert not last.tool_calls
