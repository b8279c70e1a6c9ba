"""A reply's timeline: its trace's spans, kept in memory by development's span processor and
served to the reply's owner, the quick path and every background step in start order."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from langchain_core.tools import tool
from opentelemetry.sdk.trace import TracerProvider

from demo.tools import demo_tools
from devkit import timeline
from devkit.timeline import MESSAGE_ID, Timeline
from infra import telemetry
from tests.support import create_user_with_chat, helper_with, running_stack, token_for
from tests.telemetry_sdk import TIMELINE, install_sdk

QUICK = {"load history", "store message", "chat scripted", "draft write", "persist", "handoff"}


def auth(user_id: uuid.UUID) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(user_id)}"}


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


async def test_a_replys_timeline_shows_its_quick_path_then_each_step_in_start_order(
    database_url: str,
) -> None:
    install_sdk()
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        timeline.install(stack.app, TIMELINE)
        # GIVEN a turn with two tool calls whose finalize step runs twice (its output lost once)
        stack.executor.drop_step_output("finalize")
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 1+1\n/calc 2+2"}
        )
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle(timeout=30)
        reply_id = events[0][1]["assistantMessageId"]
        # WHEN its owner asks for the reply's timeline
        answer = await stack.http.get(
            f"/api/dev/messages/{reply_id}/timeline", headers=auth(user_id)
        )
        history = await stack.http.get(f"/api/chat/{chat_id}/history", headers=auth(user_id))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    spans: list[dict[str, Any]] = body["spans"]
    assert body["messageId"] == reply_id
    assert (body["droppedSpans"], body["runningSpans"]) == (0, 0)

    # THEN the spans come in start order, from the turn's own at 0 ms
    assert [s["startMs"] for s in spans] == sorted(s["startMs"] for s in spans)
    turn = spans[0]
    assert (turn["name"], turn["depth"], turn["parentId"], turn["startMs"]) == (
        "invoke_agent handoff",
        0,
        None,
        0.0,
    )
    last_end = max(s["startMs"] + s["durationMs"] for s in spans)
    assert abs(body["durationMs"] - last_end) < 0.01
    # AND the quick path's work hangs under the turn, within its time
    children = [s for s in spans if s["parentId"] == turn["spanId"]]
    assert all(s["depth"] == 1 for s in children)
    quick = [s for s in children if s["name"] in QUICK]
    assert {s["name"] for s in quick} == QUICK
    assert all(s["startMs"] + s["durationMs"] <= turn["durationMs"] + 0.01 for s in quick)
    # AND so does each step of the background, after the handoff, in the order they ran: the
    # claim, both tool calls, the round, the finalize and its second attempt
    [handoff] = named(spans, "handoff")
    steps = [s for s in children if s["name"] not in QUICK]
    assert [s["name"] for s in steps] == [
        "claim",
        "execute_tool calc",
        "execute_tool calc",
        "model round",
        "finalize",
        "finalize",
    ]
    assert all(s["startMs"] >= handoff["startMs"] for s in steps)
    assert [s["attempt"] for s in steps] == [0, 0, 0, 0, 0, 1]
    assert {s["tool"] for s in named(steps, "execute_tool calc")} == {"calc"}
    assert all(s["error"] is None for s in spans)
    # AND the round's own work is one level deeper, its model call with its usage
    [round_span] = named(spans, "model round")
    assert round_span["round"] == 0
    in_round = [s for s in spans if s["parentId"] == round_span["spanId"]]
    assert {s["name"] for s in in_round} >= {"chat scripted", "draft write"}
    assert {s["depth"] for s in in_round} == {2}
    chats = named(spans, "chat scripted")
    assert [c["model"] for c in chats] == ["scripted", "scripted"]
    # AND the model calls' tokens add up to the reply's usage, which its history carries
    [reply] = [m for m in history.json()["messages"] if m["id"] == reply_id]
    assert reply["usage"]["input"] == sum(c["inputTokens"] for c in chats) > 0
    assert reply["usage"]["output"] == sum(c["outputTokens"] for c in chats) > 0


flaky_calls: Counter[str] = Counter()


@tool
def flaky(input: str) -> str:
    """Fails the first time per input (an upstream timeout, say), then answers."""
    flaky_calls[input] += 1
    if flaky_calls[input] == 1:
        raise ConnectionError("upstream timed out")
    return "ok"


async def test_a_failed_step_and_its_retry_are_both_in_the_timeline(database_url: str) -> None:
    install_sdk()
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, assistants=helper_with([*demo_tools(), flaky])) as stack:
        timeline.install(stack.app, TIMELINE)
        # GIVEN a tool call whose step fails once, and passes when Inngest retries it
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": f"/flaky {chat_id}"}
        )
        await stack.executor.wait_idle(timeout=30)
        reply_id = events[0][1]["assistantMessageId"]
        answer = await stack.http.get(
            f"/api/dev/messages/{reply_id}/timeline", headers=auth(user_id)
        )
    assert answer.status_code == 200, answer.text
    # THEN both attempts show, the first failed and saying why, the second its retry
    calls = named(answer.json()["spans"], "execute_tool flaky")
    assert [(c["attempt"], c["error"]) for c in calls] == [
        (0, "ConnectionError: upstream timed out"),
        (1, None),
    ]
    assert calls[0]["startMs"] < calls[1]["startMs"]


async def test_only_the_owner_sees_a_timeline_and_only_while_it_is_in_memory(
    database_url: str,
) -> None:
    install_sdk()
    user_id, chat_id = await create_user_with_chat(database_url)
    other_id, _ = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        timeline.install(stack.app, TIMELINE)
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "Hello"}
        )
        assert events[-1][0] == "done"
        reply = f"/api/dev/messages/{events[0][1]['assistantMessageId']}/timeline"
        # (the user's own message is theirs, but no trace is indexed by it)
        question = f"/api/dev/messages/{events[0][1]['userMessageId']}/timeline"
        mine = await stack.http.get(reply, headers=auth(user_id))
        theirs = await stack.http.get(reply, headers=auth(other_id))
        anonymous = await stack.http.get(reply)
        unknown = await stack.http.get(
            f"/api/dev/messages/{uuid.uuid4()}/timeline", headers=auth(user_id)
        )
        untraced = await stack.http.get(question, headers=auth(user_id))
        # A server that keeps no timelines says so.
        timeline.install(stack.app, None)
        unkept = await stack.http.get(reply, headers=auth(user_id))
    assert mine.status_code == 200, mine.text
    assert mine.json()["spans"][0]["name"] == "invoke_agent handoff"
    assert anonymous.status_code == 401
    # Another user's reply is as good as none.
    assert theirs.status_code == unknown.status_code == 404
    assert (
        theirs.json()
        == unknown.json()
        == {"error": {"code": "message_not_found", "message": "No such message of yours."}}
    )
    assert untraced.status_code == 404
    assert untraced.json()["error"]["code"] == "timeline_not_found"
    assert "not in memory" in untraced.json()["error"]["message"]
    assert unkept.json()["error"] == {
        "code": "timeline_not_found",
        "message": "This server keeps no timelines.",
    }


def test_it_keeps_the_last_traces_and_a_bounded_number_of_spans_of_each() -> None:
    # A provider of its own, not the global one: only these spans reach it.
    kept = Timeline(max_traces=2, max_spans=4)
    provider = TracerProvider()
    provider.add_span_processor(kept)
    ours = provider.get_tracer(telemetry.SCOPE)
    library = provider.get_tracer("fastapi")
    for n in range(3):
        # (the request's span, a library's, is the turn's parent)
        with (
            library.start_as_current_span("POST /api/chat/respond"),
            ours.start_as_current_span("invoke_agent handoff", attributes={MESSAGE_ID: f"m{n}"}),
        ):
            for seq in range(5):
                with ours.start_as_current_span("draft write", attributes={"seq": seq}):
                    pass
            # (while the turn runs, its timeline shows what ended, and that it goes on)
            running = kept.view(f"m{n}")
            assert running is not None
            assert (len(running.rows), running.running) == (4, 1)
            with ours.start_as_current_span("model round"):
                model = {"gen_ai.request.model": "scripted"}
                with ours.start_as_current_span("chat scripted", attributes=model):
                    pass
    # The oldest trace went. The others keep 4 spans each: past the first 4 draft writes, the
    # model call (it says something), the round (its parent) and the turn took the places of
    # the latest draft writes, and the fifth was not kept. The library's spans are not kept.
    assert kept.view("m0") is None
    for message_id in ("m1", "m2"):
        view = kept.view(message_id)
        assert view is not None
        shown = [(row.span.name, row.depth, row.span.attributes) for row in view.rows]
        assert shown == [
            ("invoke_agent handoff", 0, {}),
            ("draft write", 1, {}),
            ("model round", 1, {}),
            ("chat scripted", 2, {"model": "scripted"}),
        ]
        assert view.rows[0].start_ms == 0
        assert (view.dropped, view.running) == (4, 0)
    assert kept.view("m9") is None
