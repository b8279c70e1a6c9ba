"""One trace per turn, across the quick path and the background run, and the metrics beside it,
read from the OpenTelemetry SDK's in-memory exporter and reader."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from infra import telemetry
from tests.support import create_user_with_chat, running_stack, token_for
from tests.telemetry_sdk import EXPORTER, READER, install_sdk


@pytest.fixture
def spans() -> InMemorySpanExporter:
    # The SDK is global and installed once per process; each test reads only its own spans.
    install_sdk()
    EXPORTER.clear()
    READER.get_metrics_data()  # what earlier tests recorded is not ours
    return EXPORTER


def ours(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, ...]:
    """The product's spans (libraries that trace their own work use the same SDK)."""
    return tuple(
        s
        for s in exporter.get_finished_spans()
        if s.instrumentation_scope and s.instrumentation_scope.name == telemetry.SCOPE
    )


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def metric_points() -> dict[str, list[Any]]:
    """Every data point recorded since the last read, by metric name."""
    data = READER.get_metrics_data()
    assert data is not None
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_a_handed_off_turn_and_its_replay_are_one_trace(
    database_url: str, spans: InMemorySpanExporter
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        # GIVEN a turn with two tool calls, the second of whose step outputs is lost once (its
        # step runs again)
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 1+1\n/calc 2+2"}
        )
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle(timeout=30)
        # WHEN an operator replays the run from the dashboard after it completed
        await stack.executor.replay(events[-1][1]["eventId"])
        await stack.executor.wait_idle(timeout=30)
    finished = ours(spans)

    # THEN every span is of one trace, which the request began
    [turn] = by_name(finished, "invoke_agent handoff")
    assert {s.context.trace_id for s in finished} == {turn.context.trace_id}
    reply_id = events[0][1]["assistantMessageId"]
    assert turn.attributes is not None
    assert turn.attributes["gen_ai.conversation.id"] == str(chat_id)
    assert turn.attributes["handoff.message.id"] == reply_id
    # AND the quick path's work hangs under it
    children = {s.name for s in finished if s.parent and s.parent.span_id == turn.context.span_id}
    assert {"load history", "store message", "chat scripted", "persist", "handoff"} <= children
    # AND so does each step of the background run: the claim (twice: the replay's found the
    # job done), each tool call, the model round, the finalize
    quick = {"load history", "store message", "chat scripted", "draft write", "persist", "handoff"}
    steps = [
        s.name
        for s in finished
        if s.parent and s.parent.span_id == turn.context.span_id and s.name not in quick
    ]
    assert sorted(steps) == sorted(
        ["claim", "claim", "execute_tool calc", "execute_tool calc", "model round", "finalize"]
    )
    # AND the model calls carry the GenAI attributes, usage included
    chats = by_name(finished, "chat scripted")
    assert len(chats) == 2
    for chat in chats:
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert int(str(chat.attributes["gen_ai.usage.output_tokens"])) > 0
        assert int(str(chat.attributes["gen_ai.usage.input_tokens"])) > 0
    [round_span] = by_name(finished, "model round")
    [round_chat] = [c for c in chats if c.parent and c.parent.span_id == round_span.context.span_id]
    assert round_chat.attributes is not None
    ids = [
        (t.attributes or {})["gen_ai.tool.call.id"] for t in by_name(finished, "execute_tool calc")
    ]
    assert len(set(ids)) == 2
    # AND the draft writes of the round are its children
    drafts = by_name(finished, "draft write")
    assert any(d.parent and d.parent.span_id == round_span.context.span_id for d in drafts)


async def test_a_step_run_again_is_a_second_attempt_in_the_same_trace(
    database_url: str, spans: InMemorySpanExporter
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        # GIVEN a step whose output is lost once after it ran
        stack.executor.drop_step_output("finalize")
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 6*7"}
        )
        await stack.executor.wait_idle(timeout=30)
        assert stack.handoff_run().attempts["finalize"] == 2
    finished = ours(spans)
    [turn] = by_name(finished, "invoke_agent handoff")
    finals = by_name(finished, "finalize")
    # THEN the step shows twice, attempts 0 and 1, both in the turn's trace
    assert sorted(int(str((f.attributes or {})["handoff.attempt"])) for f in finals) == [0, 1]
    assert {f.context.trace_id for f in finals} == {turn.context.trace_id}
    assert events[-1][0] == "handoff"


async def test_the_metrics_count_a_turn_once(
    database_url: str, spans: InMemorySpanExporter
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 1+1\n/calc 2+2"}
        )
        await stack.executor.wait_idle(timeout=30)
        # (a replay after completion changes nothing, and counts nothing)
        await stack.executor.replay(events[-1][1]["eventId"])
        await stack.executor.wait_idle(timeout=30)
    points = metric_points()
    [first_token] = points["handoff.turn.first_token"]
    assert first_token.count == 1
    [handoff] = points["handoff.turn.handoff_latency"]
    assert handoff.count == 1
    [resume] = points["handoff.job.resume_overhead"]
    assert resume.count == 1
    turns = {
        (p.attributes["handoff.outcome"], p.attributes["handoff.path"]): p.value
        for p in points["handoff.turns"]
    }
    assert turns == {("completed", "background"): 1}
    [duration] = points["handoff.job.duration"]
    assert duration.count == 1
    [calls] = points["handoff.tool_calls"]
    assert (calls.attributes["gen_ai.tool.name"], calls.value) == ("calc", 2)
    usage = {p.attributes["gen_ai.token.type"]: p for p in points["gen_ai.client.token.usage"]}
    assert usage["input"].count == usage["output"].count == 2
    drafts = {p.attributes["handoff.path"]: p.count for p in points["handoff.draft.writes"]}
    assert drafts == {"quick": 1, "background": 1}
