"""The scripted model through the real agent graph, and what the user sees of a state."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, cast

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import (
    AGENT_NODE,
    BUDGET_TEXT,
    ROUND_LIMIT_TEXT,
    TOOLS_NODE,
    AgentGraph,
    build_agent_graph,
    state_values,
)
from agent.model import (
    ScriptedChatModel,
    create_model,
    create_model_from_spec,
    model_spec,
    parse_tool_lines,
    parse_tool_rounds,
)
from agent.snapshot import PARAGRAPH_BREAK, ToolProgress, render_agent_snapshot
from agent.state import AgentState
from agent.threads import thread_config, thread_key
from demo.tools import demo_tools


def make_graph(
    *,
    token_delay_ms: float = 0,
    interrupt_before_tools: bool = True,
    max_tool_rounds: int | None = None,
    saver: InMemorySaver | None = None,
) -> AgentGraph:
    options: dict[str, Any] = {"interrupt_before_tools": interrupt_before_tools}
    if max_tool_rounds is not None:
        options["max_tool_rounds"] = max_tool_rounds
    return build_agent_graph(
        ScriptedChatModel(token_delay_ms=token_delay_ms),
        demo_tools(),
        saver if saver is not None else InMemorySaver(),
        **options,
    )


def new_thread() -> RunnableConfig:
    return thread_config(thread_key(uuid.uuid4(), "default"))


def said(text: str) -> AgentState:
    return {"messages": [HumanMessage(content=text)]}


async def run_turn(graph: AgentGraph, config: RunnableConfig, text: str) -> AgentState:
    return cast(AgentState, await graph.ainvoke(said(text), config))


async def saved_values(graph: AgentGraph, config: RunnableConfig) -> AgentState:
    """The state the checkpointer holds for the thread."""
    return state_values(await graph.aget_state(config))


async def streamed_tokens(graph: AgentGraph, config: RunnableConfig, text: str) -> list[str]:
    """The non-empty text chunks the agent node streams for one user message."""
    tokens: list[str] = []
    async for item in graph.astream(said(text), config, stream_mode="messages"):
        # messages mode yields (message chunk, metadata) pairs
        chunk, metadata = cast(tuple[Any, dict[str, Any]], item)
        if (
            isinstance(chunk, AIMessageChunk)
            and metadata["langgraph_node"] == AGENT_NODE
            and isinstance(chunk.content, str)
            and chunk.content
        ):
            tokens.append(chunk.content)
    return tokens


def last_ai(state: AgentState) -> AIMessage:
    message = state["messages"][-1]
    assert isinstance(message, AIMessage)
    return message


# --- plain replies ---------------------------------------------------------------------------


async def test_plain_message_streams_word_by_word_and_quotes_the_message() -> None:
    # GIVEN a fresh thread
    graph, config = make_graph(), new_thread()

    # WHEN the user says something without a tool line
    tokens = await streamed_tokens(graph, config, "hello there, friend")

    # THEN the reply arrives one word per chunk and quotes the message
    reply = 'You said: "hello there, friend"'
    assert "".join(tokens) == reply
    assert len(tokens) == len(reply.split(" ")) == 5
    assert all(token.count(" ") <= 1 for token in tokens)
    # AND the turn is finished, with nothing left to run
    assert (await graph.aget_state(config)).next == ()
    values = await saved_values(graph, config)
    assert values["status"] == "completed"
    assert last_ai(values).content == reply


async def test_unknown_tool_name_is_treated_as_plain_text() -> None:
    graph, config = make_graph(), new_thread()

    state = await run_turn(graph, config, "/launch rockets")

    reply = last_ai(state)
    assert reply.tool_calls == []
    assert reply.content == 'You said: "/launch rockets"'
    assert (await graph.aget_state(config)).next == ()


# --- tool calls ------------------------------------------------------------------------------


async def test_tool_line_pauses_before_tools_with_one_call_and_a_preface() -> None:
    # GIVEN a graph that pauses at the tool boundary
    graph, config = make_graph(), new_thread()

    # WHEN the user asks for a calculation
    tokens = await streamed_tokens(graph, config, "/calc 2*21")

    # THEN the graph waits before `tools` with exactly that call
    assert (await graph.aget_state(config)).next == (TOOLS_NODE,)
    values = await saved_values(graph, config)
    reply = last_ai(values)
    [call] = reply.tool_calls
    assert call["name"] == "calc"
    assert call["args"] == {"input": "2*21"}
    assert call["id"]
    # AND the user has already seen a one-sentence preface, streamed word by word
    preface = "".join(tokens)
    assert preface == reply.content == "Let me use calc for that."
    assert len(tokens) == len(preface.split(" "))
    assert preface.endswith(".")
    assert sum(preface.count(end) for end in ".!?") == 1
    assert values["status"] == "needs_tool_handoff"
    assert values.get("tool_invocations") == [
        {"id": call["id"], "name": "calc", "args": {"input": "2*21"}, "status": "pending"}
    ]


async def test_tool_line_among_other_text_still_calls_the_tool() -> None:
    graph, config = make_graph(), new_thread()

    state = await run_turn(graph, config, "Could you work this out?\n  /calc 6*7  \nthanks")

    [call] = last_ai(state).tool_calls
    assert (call["name"], call["args"]) == ("calc", {"input": "6*7"})


async def test_two_tool_lines_become_two_parallel_calls_with_distinct_ids() -> None:
    graph, config = make_graph(), new_thread()

    state = await run_turn(graph, config, "/calc 1+1\n/report 2")

    reply = last_ai(state)
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("calc", {"input": "1+1"}),
        ("report", {"input": "2"}),
    ]
    ids = [c["id"] for c in reply.tool_calls]
    assert len(set(ids)) == 2
    assert all(ids)
    assert reply.content == "Let me use calc, report for that."
    assert (await graph.aget_state(config)).next == (TOOLS_NODE,)


async def test_same_tool_line_in_a_later_turn_gets_a_new_call_id() -> None:
    # GIVEN a finished tool turn
    saver, config = InMemorySaver(), new_thread()
    graph = make_graph(interrupt_before_tools=False, saver=saver)
    first = last_ai_with_calls(await run_turn(graph, config, "/calc 2*21"))

    # WHEN the user sends the very same line again, on a pausing graph over the same history
    pausing = make_graph(saver=saver)
    second = last_ai_with_calls(await run_turn(pausing, config, "/calc 2*21"))

    # THEN the new call is not mistaken for the one already answered
    assert first.tool_calls[0]["id"] != second.tool_calls[0]["id"]
    assert (await pausing.aget_state(config)).next == (TOOLS_NODE,)


def last_ai_with_calls(state: AgentState) -> AIMessage:
    return next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage) and m.tool_calls)


async def test_json_object_argument_line_parses_as_the_object() -> None:
    graph, config = make_graph(), new_thread()

    state = await run_turn(graph, config, '/calc {"input": "1+1"}')

    [call] = last_ai(state).tool_calls
    assert call["args"] == {"input": "1+1"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/calc 2*21", [("calc", {"input": "2*21"})]),
        ("/calc", [("calc", {"input": ""})]),
        ('/report {"input": "3", "extra": [1, 2]}', [("report", {"input": "3", "extra": [1, 2]})]),
        ("/calc {not json", [("calc", {"input": "{not json"})]),
        ('/calc ["1+1"]', [("calc", {"input": '["1+1"]'})]),
        ("/calc 1\n/sleep 0", [("calc", {"input": "1"}), ("sleep", {"input": "0"})]),
        ("no tools here / at all", []),
        ("a/calc 1", []),
        ("/9lives 1", []),
    ],
)
def test_parse_tool_lines(text: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    assert parse_tool_lines(text) == expected


async def test_without_interrupt_the_graph_runs_the_tool_and_quotes_the_result() -> None:
    # GIVEN a graph that does not pause at the tool boundary
    graph, config = make_graph(interrupt_before_tools=False), new_thread()

    # WHEN the user asks for a calculation
    state = await run_turn(graph, config, "/calc 2*21")

    # THEN the tool ran and the final answer quotes its result
    assert [type(m) for m in state["messages"]] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert state["messages"][2].content == "42"
    summary = last_ai(state)
    assert summary.tool_calls == []
    assert "42" in str(summary.content)
    assert state["status"] == "completed"
    assert render_agent_snapshot(state).text == (
        "Let me use calc for that." + PARAGRAPH_BREAK + str(summary.content)
    )


async def test_summary_quotes_every_parallel_result() -> None:
    graph, config = make_graph(interrupt_before_tools=False), new_thread()

    state = await run_turn(graph, config, "/calc 2*21\n/calc 10-3")

    summary = str(last_ai(state).content)
    assert "42" in summary
    assert "7" in summary


async def test_then_line_starts_a_second_tool_round_after_the_first_results() -> None:
    graph, config = make_graph(interrupt_before_tools=False), new_thread()

    # WHEN one message asks for two parallel calls, then (after their results) a third
    state = await run_turn(graph, config, "/calc 2*21\n/calc 10-3\n/then\n/calc 6*7")

    # THEN the model made two rounds: two calls, then one, and summarised the last
    kinds = [type(m) for m in state["messages"]]
    assert kinds == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        ToolMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
    ]
    first, second = state["messages"][1], state["messages"][4]
    assert isinstance(first, AIMessage)
    assert isinstance(second, AIMessage)
    assert [c["args"] for c in first.tool_calls] == [{"input": "2*21"}, {"input": "10-3"}]
    assert [c["args"] for c in second.tool_calls] == [{"input": "6*7"}]
    assert (
        str(second.content) == "So far: calc returned 42. calc returned 7. Next, let me use calc."
    )
    ids = [c["id"] for c in [*first.tool_calls, *second.tool_calls]]
    assert len(set(ids)) == 3
    assert str(last_ai(state).content) == "Here is what I found: calc returned 42."


async def test_a_result_that_ends_a_sentence_is_quoted_with_one_full_stop() -> None:
    graph, config = make_graph(interrupt_before_tools=False), new_thread()
    state = await run_turn(
        graph, config, '/send_email {"to": "ada@example.com", "subject": "Minutes"}'
    )
    assert str(last_ai(state).content) == (
        "Here is what I found: send_email returned Email to ada@example.com sent (simulated),"
        " subject 'Minutes', 0 characters."
    )


def test_parse_tool_rounds_skips_empty_rounds_and_unknown_tools() -> None:
    text = "/then\nhello\n/calc 1\n/nope x\n/then\n/then\n/sleep 0"
    assert parse_tool_rounds(text, {"calc", "sleep"}) == [
        [("calc", {"input": "1"})],
        [("sleep", {"input": "0"})],
    ]


# --- the round cap ---------------------------------------------------------------------------


async def test_round_cap_of_zero_answers_with_the_limit_text() -> None:
    graph, config = make_graph(max_tool_rounds=0), new_thread()

    state = await run_turn(graph, config, "/calc 2*21")

    reply = last_ai(state)
    assert str(reply.content).endswith(ROUND_LIMIT_TEXT)
    assert reply.tool_calls == []
    assert state["status"] == "completed"
    assert (await graph.aget_state(config)).next == ()


async def test_round_cap_counts_only_the_current_turn() -> None:
    # GIVEN a thread whose previous turn used its one allowed tool round
    graph, config = make_graph(max_tool_rounds=1), new_thread()
    await run_turn(graph, config, "/calc 2*21")
    await graph.ainvoke(None, config)
    assert (await graph.aget_state(config)).next == ()

    # WHEN the user asks for a tool again
    state = await run_turn(graph, config, "/calc 1+1")

    # THEN the new turn may use a tool round of its own
    [call] = last_ai(state).tool_calls
    assert call["args"] == {"input": "1+1"}
    assert (await graph.aget_state(config)).next == (TOOLS_NODE,)


async def test_round_cap_of_one_still_answers_from_the_first_round() -> None:
    # GIVEN at most one tool round per turn
    graph, config = make_graph(interrupt_before_tools=False, max_tool_rounds=1), new_thread()

    # WHEN the answer needs exactly one round
    state = await run_turn(graph, config, "/calc 2*21")

    # THEN the user gets the answer, not the "too many tool steps" text
    summary = last_ai(state)
    assert summary.content != ROUND_LIMIT_TEXT
    assert "42" in str(summary.content)


# --- model factory and timing ----------------------------------------------------------------


def test_create_model_builds_the_scripted_model_with_its_delay() -> None:
    model = create_model("scripted", token_delay_ms=7)
    assert isinstance(model, ScriptedChatModel)
    assert model.token_delay_ms == 7


def test_a_model_spec_round_trips_to_the_same_scripted_model() -> None:
    spec = model_spec("scripted", token_delay_ms=3)
    assert json.loads(json.dumps(spec)) == spec
    model = create_model_from_spec(spec)
    assert isinstance(model, ScriptedChatModel)
    assert model.token_delay_ms == 3


@pytest.mark.parametrize("name", ["nonsense", "", "Scripted"])
def test_create_model_rejects_unknown_names(name: str) -> None:
    with pytest.raises(ValueError, match="scripted"):
        create_model(name)


async def test_token_delay_slows_the_stream() -> None:
    # GIVEN a model that waits 20 ms before each token
    graph, config = make_graph(token_delay_ms=20), new_thread()

    # WHEN it streams a ten-word reply
    started = time.perf_counter()
    tokens = await streamed_tokens(graph, config, "a b c d e f g h")
    elapsed = time.perf_counter() - started

    # THEN the reply took at least most of 10 x 20 ms
    assert len(tokens) == 10
    assert elapsed >= 0.15


async def test_no_token_delay_streams_quickly() -> None:
    graph, config = make_graph(token_delay_ms=0), new_thread()

    started = time.perf_counter()
    tokens = await streamed_tokens(graph, config, "a b c d e f g h")

    assert len(tokens) == 10
    assert time.perf_counter() - started < 1.0


# --- what the user sees ----------------------------------------------------------------------


async def test_snapshot_of_a_paused_turn_shows_preface_status_and_pending_tools() -> None:
    graph, config = make_graph(), new_thread()
    await run_turn(graph, config, "/calc 1+1\n/sleep 0")

    snapshot = render_agent_snapshot(await saved_values(graph, config))

    assert snapshot.text == "Let me use calc, sleep for that."
    assert snapshot.status == "needs_tool_handoff"
    assert [(p.name, p.status) for p in snapshot.progress] == [
        ("calc", "pending"),
        ("sleep", "pending"),
    ]
    assert snapshot.to_json() == {
        "text": "Let me use calc, sleep for that.",
        "status": "needs_tool_handoff",
        "progress": [{"id": p.id, "name": p.name, "status": "pending"} for p in snapshot.progress],
    }


async def test_snapshot_shows_only_the_current_turn() -> None:
    # GIVEN a thread with a finished tool turn
    graph, config = make_graph(interrupt_before_tools=False), new_thread()
    await run_turn(graph, config, "/calc 2*21")

    # WHEN the user says something else
    state = await run_turn(graph, config, "thanks")

    # THEN the snapshot holds only the new reply, without the old turn's tools
    snapshot = render_agent_snapshot(state)
    assert snapshot.text == 'You said: "thanks"'
    assert snapshot.status == "completed"
    assert snapshot.progress == ()


def test_snapshot_applies_tool_progress_by_id() -> None:
    call = {"id": "call_1", "name": "calc", "args": {"input": "1+1"}}
    state: AgentState = {
        "messages": [
            HumanMessage(content="/calc 1+1"),
            AIMessage(content="Let me use calc for that.", tool_calls=[call]),
        ],
        "status": "running_tools",
        "tool_invocations": [
            {"id": "call_1", "name": "calc", "args": {"input": "1+1"}, "status": "completed"},
            {"id": "call_old", "name": "calc", "args": {}, "status": "error"},
        ],
    }

    snapshot = render_agent_snapshot(state)

    assert snapshot.progress == (ToolProgress(id="call_1", name="calc", status="completed"),)
    assert snapshot.status == "running_tools"


def test_snapshot_without_a_status_is_streaming() -> None:
    snapshot = render_agent_snapshot({"messages": [HumanMessage(content="hi")]})
    assert snapshot.status == "streaming"
    assert snapshot.text == ""


def test_snapshot_joins_text_blocks_and_skips_other_content() -> None:
    state: AgentState = {
        "messages": [
            HumanMessage(content="hi"),
            AIMessage(
                content=[
                    {"type": "text", "text": "Hello "},
                    {"type": "image_url", "image_url": {"url": "https://example.invalid/x.png"}},
                    "world",
                ]
            ),
        ],
        "status": "completed",
    }
    assert render_agent_snapshot(state).text == "Hello world"


async def test_a_turn_that_spent_its_output_budget_runs_no_further_tools() -> None:
    # GIVEN a budget of 10 output tokens a turn (the scripted model counts words)
    graph = build_agent_graph(
        ScriptedChatModel(token_delay_ms=0),
        demo_tools(),
        InMemorySaver(),
        interrupt_before_tools=False,
        max_output_tokens=10,
    )
    config = new_thread()

    # WHEN the answer would need a second round of tools after a first that fit
    state = await run_turn(graph, config, "/calc 1+1\n/then\n/calc 2+2")

    # THEN the first round ran, the second was refused, and the reply says why
    answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in answers] == ["2"]
    assert last_ai(state).tool_calls == []
    assert str(last_ai(state).content).endswith(BUDGET_TEXT)
