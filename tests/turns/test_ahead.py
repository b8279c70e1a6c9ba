"""A turn run ahead of its start (turns/ahead.py): no node of the assistant's graph runs for a
message the start refuses, and a turn whose thread another process moved on runs on the head
the database holds, the model asked once."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from agent.assistants import Assistant, Assistants
from agent.graph import AgentParts, route_after_agent
from agent.model import ScriptedChatModel
from agent.state import AgentState
from agent.text import visible_text
from agent.threads import thread_key
from bench.stack import child_server
from infra.store.heads import RECENT_HEADS
from tests.api import parse_sse
from tests.fake_providers import serve_fake_providers
from tests.fake_providers.varying import Varying
from tests.support import (
    create_user_with_chat,
    durable_messages,
    fetch,
    running_stack,
    token_for,
)
from turns.ahead import Gate

# What the noting assistant's first node saw, message by message: its side effect.
NOTED: list[str] = []


async def noting_graph_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    NOTED.append(str(state["messages"][-1].content))
    return {}


def noting_graph(parts: AgentParts) -> StateGraph[AgentState, None, AgentState, AgentState]:
    """A node that notes the user's last words, as an assistant's own code may act on them
    (call a service, spend money), before Handoff's tool loop."""

    builder = StateGraph(AgentState)
    builder.add_node("note", noting_graph_node)
    builder.add_node("agent", parts.agent)
    builder.add_node("tools", parts.tool_node())
    builder.add_edge(START, "note")
    builder.add_edge("note", "agent")
    builder.add_conditional_edges("agent", route_after_agent)
    builder.add_edge("tools", "agent")
    return builder


NOTER = Assistant(id="noter", name="Noter", graph=noting_graph)


async def test_the_gate_holds_every_node_until_it_opens() -> None:
    # GIVEN a graph whose first node notes what it is given, run with the gate as a callback
    builder = StateGraph(AgentState)
    builder.add_node("note", noting_graph_node)
    builder.add_edge(START, "note")
    graph = builder.compile(checkpointer=InMemorySaver())
    gate = Gate()
    NOTED.clear()
    config: RunnableConfig = {"configurable": {"thread_id": "t"}, "callbacks": [gate]}
    run = asyncio.create_task(graph.ainvoke({"messages": [HumanMessage("held")]}, config))
    # WHEN the run has had every chance to go on
    await asyncio.sleep(0.05)
    # THEN the node has not run; once the gate opens, it runs, once
    assert NOTED == []
    assert not run.done()
    gate.open()
    await run
    assert NOTED == ["held"]


class CountingGate(Gate):
    """The gate, counting the events it is called for."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = 0
        self.starts = 0

    async def on_llm_new_token(
        self, token: str | list[str | dict[str, Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.tokens += 1

    async def on_chain_start(
        self, serialized: dict[str, Any] | None, inputs: dict[str, Any] | Any, **kwargs: Any
    ) -> None:
        self.starts += 1
        await super().on_chain_start(serialized, inputs, **kwargs)


async def test_an_open_gate_is_called_for_no_event() -> None:
    # GIVEN a graph whose node streams a model's answer, and an open gate as its callback
    model = ScriptedChatModel(token_delay_ms=0)

    async def answer(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"], config)]}

    builder = StateGraph(AgentState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    gate = CountingGate()
    gate.open()
    # WHEN the graph runs, its answer streamed
    config: RunnableConfig = {"callbacks": [gate]}
    graph_input: Any = {"messages": [HumanMessage("hello there")]}
    graph = builder.compile()
    streamed = [c async for c, _ in graph.astream(graph_input, config, stream_mode="messages")]
    # THEN none of its tokens, nor any node's start, called the gate
    assert len(streamed) > 2
    assert (gate.tokens, gate.starts) == (0, 0)


async def test_no_node_runs_for_a_message_its_start_refuses(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    body = {"chatId": str(chat_id)}
    NOTED.clear()
    async with running_stack(
        database_url, assistants=Assistants([NOTER]), max_turns_per_minute=2
    ) as stack:
        # GIVEN two turns, the second run ahead on the head the first stored
        for words in ("one", "two"):
            events = await stack.respond(token, {**body, "content": words})
            assert events[-1][0] == "done"
        assert RECENT_HEADS.held(thread_key(chat_id, "noter")) is not None
        # WHEN a third message goes past the user's turns per minute
        refused = await stack.respond_response(token, {**body, "content": "three"})
    # THEN it is refused, and no node of the graph ran for it, though its run began ahead
    assert refused.status_code == 429
    assert NOTED == ["one", "two"]


@pytest.mark.parametrize("model_name", ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
async def test_a_turn_runs_on_the_head_another_process_stored(
    database_url: str, model_name: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with serve_fake_providers() as fake:
        fake.vary(Varying())
        model: dict[str, Any] = {
            "model": model_name,
            "openai_base_url": fake.openai_base_url,
            "openai_api_key": "test-key",
            "anthropic_base_url": fake.anthropic_base_url,
            "anthropic_api_key": "test-key",
        }
        async with (
            running_stack(database_url, **model) as here,
            child_server("handoff", database_url, **model) as there,
            httpx.AsyncClient(base_url=there, timeout=30) as other,
        ):
            # GIVEN a turn in this process, which recalls the head it stored
            first = await here.respond(token, {"chatId": str(chat_id), "content": "first"})
            assert first[-1][0] == "done"
            # AND a turn of the same chat in another process, which moves the thread on
            response = await other.post(
                "/api/chat/respond",
                json={"chatId": str(chat_id), "content": "second"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert parse_sse(response.content)[-1][0] == "done"
            # WHEN the next message comes to this process again
            third = await here.respond(token, {"chatId": str(chat_id), "content": "third"})
        asked = [str(r.body) for r in fake.requests]
    # THEN it answers on the thread as stored, the other process's turn in it
    assert third[-1][0] == "done"
    said = [visible_text(m) for m in await durable_messages(database_url, chat_id, "default")]
    assert said[0::2] == ["first", "second", "third"]
    assert said[5] == third[-1][1]["content"]
    # AND the model was asked once a turn, the third time with the second turn's answer in it
    assert len(asked) == 3
    assert said[3] in asked[2] or said[3].replace('"', '\\"') in asked[2]
    replies = await fetch(
        database_url,
        "select count(*) as n from message where chat_id = %s and role = 'assistant'",
        chat_id,
    )
    assert replies[0]["n"] == 3
