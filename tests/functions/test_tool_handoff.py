"""The background function: parallel tools, failures, duplicate deliveries and replays."""

from __future__ import annotations

import uuid
from collections import Counter

import inngest
import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from demo.tools import demo_tools
from functions.tool_handoff import RETRIES
from infra.events import HANDOFF_EVENT
from tests.support import (
    create_user_with_chat,
    durable_messages,
    fetch,
    helper_with,
    running_stack,
    token_for,
)


async def test_parallel_tool_calls_each_run_once_as_their_own_step(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 6*7\n/calc 10-3"}
        )
        await stack.executor.wait_idle()
        [run] = stack.executor.runs()
    assert run.status == "completed"
    tool_steps = [name for name in run.attempts if name.startswith("tool-")]
    assert len(tool_steps) == 2
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    assert "calc returned 42." in message["content"]
    assert "calc returned 7." in message["content"]
    history = await durable_messages(database_url, chat_id)
    assert sorted(str(m.content) for m in history if isinstance(m, ToolMessage)) == ["42", "7"]


async def tool_messages(database_url: str, chat_id: uuid.UUID) -> list[ToolMessage]:
    return [m for m in await durable_messages(database_url, chat_id) if isinstance(m, ToolMessage)]


@pytest.mark.parametrize(
    ("content", "told"),
    [
        # The tool refuses the input itself.
        ("/calc 2*", "Error: invalid input for calc: not an arithmetic expression: '2*'"),
        # An argument the tool does not take, as real models sometimes send.
        ('/calc {"expression": "2*3"}', "Error: invalid arguments for calc: input: Field required"),
    ],
)
async def test_a_call_the_tool_cannot_take_is_answered_to_the_model(
    database_url: str, content: str, told: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": content}
        )
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    # THEN the model reads why, once (no retry can mend the call), and answers
    assert run.status == "completed"
    assert [n for step, n in run.attempts.items() if step.startswith("tool-")] == [1]
    [tool_message] = [
        m for m in await durable_messages(database_url, chat_id) if isinstance(m, ToolMessage)
    ]
    assert tool_message.status == "error"
    assert str(tool_message.content).startswith(told)
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    assert f"calc returned {told}" in message["content"]
    # AND the person sees the tool as failed, not an apology for the whole turn
    progress = message["metadata"]["snapshot"]["progress"]
    assert [(p["name"], p["status"]) for p in progress] == [("calc", "error")]
    [job] = await fetch(database_url, "select * from job_runs")
    assert (job["status"], job["error"]) == ("completed", None)


@tool
def broken(input: str) -> str:
    """Fails every time (a service that is down)."""
    raise ConnectionError(f"connection to 10.0.0.5 refused for {input}")


async def test_a_tool_that_fails_every_retry_is_answered_to_the_model(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(
        database_url, assistants=helper_with([*demo_tools(), broken])
    ) as stack:
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "/broken x"})
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    # THEN the step was retried to its limit, then the model was told, without internals
    assert run.status == "completed"
    [tool_attempts] = [n for step, n in run.attempts.items() if step.startswith("tool-")]
    assert tool_attempts == RETRIES + 1
    [tool_message] = [
        m for m in await durable_messages(database_url, chat_id) if isinstance(m, ToolMessage)
    ]
    assert tool_message.status == "error"
    assert tool_message.content == "Error: broken failed (ConnectionError) on every retry."
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    assert "10.0.0.5" not in message["content"]


async def test_duplicate_delivery_and_replay_of_a_finished_job_change_nothing(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 2*21"}
        )
        event_id = events[-1][1]["eventId"]
        await stack.executor.wait_idle()
        [before] = await fetch(database_url, "select * from message where role = 'assistant'")
        # WHEN an operator replays the completed run twice (same payload, new run ids)
        for _ in range(2):
            await stack.executor.replay(event_id)
        await stack.executor.wait_idle()
        runs = stack.executor.runs()
    # THEN the replays end without running a tool or touching the message
    assert [r.status for r in runs] == ["completed"] * 3
    assert all(r.output == {"status": "skipped"} for r in runs[1:])
    assert all(not any(n.startswith("tool-") for n in r.attempts) for r in runs[1:])
    [after] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert after == before
    [job] = await fetch(database_url, "select * from job_runs")
    assert job["status"] == "completed"
    assert job["attempt"] == 1
    history = await durable_messages(database_url, chat_id)
    assert len([m for m in history if isinstance(m, ToolMessage)]) == 1


flaky_calls: Counter[str] = Counter()


@tool
def flaky(input: str) -> str:
    """Fails twice per input (a timeout, say), then answers."""
    flaky_calls[input] += 1
    if flaky_calls[input] <= 2:
        raise ConnectionError("upstream timed out")
    return f"ok after {flaky_calls[input]} tries"


async def test_transient_tool_errors_are_retried(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, assistants=helper_with([*demo_tools(), flaky])) as stack:
        await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": f"/flaky {chat_id}"}
        )
        await stack.executor.wait_idle()
        [run] = stack.executor.runs()
    assert run.status == "completed"
    assert flaky_calls[str(chat_id)] == 3
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    assert "flaky returned ok after 3 tries." in message["content"]


@pytest.mark.parametrize(("silent_for", "taken_over"), [("1 hour", True), ("1 minute", False)])
async def test_a_replay_takes_over_a_job_whose_run_went_silent_past_the_lease(
    database_url: str, silent_for: str, taken_over: bool
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, job_lease_s=15 * 60) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 2*21"}
        )
        await stack.executor.wait_idle()
        # GIVEN the job is held by a run that died without reaching on_failure
        await fetch(
            database_url,
            "update job_runs set status = 'processing', run_id = 'dead-run',"
            " updated_at = now() - %s::interval returning id",
            silent_for,
        )
        # WHEN an operator replays it
        await stack.executor.replay(events[-1][1]["eventId"])
        await stack.executor.wait_idle()
        replay = stack.executor.runs()[-1]
    # THEN past the lease the replay finishes the job; within it, the live run keeps it
    [job] = await fetch(database_url, "select * from job_runs")
    assert replay.output == (
        {"status": "completed", "rounds": 0} if taken_over else {"status": "skipped"}
    )
    assert job["status"] == ("completed" if taken_over else "processing")
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    assert "42" in message["content"]


async def test_the_job_row_not_the_event_says_which_message_and_model(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        # GIVEN a handed-off job whose event never arrived
        stack.executor.refuse_events(5)
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 2*21"}
        )
        key = events[-1][1]["eventId"]
        [job] = await fetch(database_url, "select payload from job_runs")
        # WHEN an event with its id arrives carrying other data
        tampered = {
            **job["payload"],
            "rootMessageId": str(uuid.uuid4()),
            "modelConfig": {"model": "no-such-provider:model"},
        }
        await stack.app.state.events.send(inngest.Event(id=key, name=HANDOFF_EVENT, data=tampered))
        await stack.executor.wait_idle()
        [run] = stack.executor.runs()
    # THEN the run used the stored payload: the real message completed with the scripted model
    assert run.status == "completed"
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    assert "42" in message["content"]


async def test_the_message_shows_tool_progress_from_handoff_to_the_end(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        # The sleep keeps the job's first round from ending before the first look.
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/sleep 1\n/calc 6*7"}
        )
        message_id = events[-1][1]["assistantMessageId"]
        query = "select metadata -> 'snapshot' as snapshot from message where id = %s"
        # WHEN the turn hands off, THEN both calls show as pending
        [at_handoff] = await fetch(database_url, query, message_id)
        assert at_handoff["snapshot"]["status"] == "needs_tool_handoff"
        assert [(p["name"], p["status"]) for p in at_handoff["snapshot"]["progress"]] == [
            ("sleep", "pending"),
            ("calc", "pending"),
        ]
        await stack.executor.wait_idle()
        # AND once the job ends, both as completed, in the message and in the history
        [at_end] = await fetch(database_url, query, message_id)
        history = await stack.messages(token_for(user_id), chat_id)
    assert at_end["snapshot"]["status"] == "completed"
    assert {p["status"] for p in at_end["snapshot"]["progress"]} == {"completed"}
    [reply] = [m for m in history if m["role"] == "assistant"]
    assert reply["progress"] == at_end["snapshot"]["progress"]


async def test_each_reply_records_its_token_usage_and_each_job_its_figures(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        auth = token_for(user_id)
        # GIVEN a turn answered on the quick path, and one that runs two tools in the background
        await stack.respond(auth, {"chatId": str(chat_id), "content": "hello there"})
        await stack.respond(auth, {"chatId": str(chat_id), "content": "/calc 1+1\n/calc 2+2"})
        await stack.executor.wait_idle()
    quick, tools = await fetch(
        database_url,
        "select metadata -> 'usage' as usage from message where role = 'assistant'"
        " order by created_at",
    )
    # THEN each reply holds what its model calls reported (the scripted model counts words),
    # call by call and summed
    assert len(quick["usage"]["rounds"]) == 1
    assert quick["usage"]["output"] == len(["You", "said:", '"hello', 'there"'])
    rounds = tools["usage"]["rounds"]
    assert len(rounds) == 2
    assert tools["usage"]["input"] == sum(r["input"] for r in rounds) > 0
    assert tools["usage"]["output"] == sum(r["output"] for r in rounds) > 0
    # AND the background job its tool calls and how long it took
    [job] = await fetch(database_url, "select metadata from job_runs where kind = 'handoff'")
    assert job["metadata"]["toolCalls"] == 2
    assert job["metadata"]["durationMs"] > 0


async def test_calls_past_the_rounds_limit_are_answered_not_run(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, max_parallel_tool_calls=2) as stack:
        # GIVEN a model that asks for three calls at once, with two allowed
        content = "/calc 1+1\n/calc 2+2\n/calc 3+3"
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": content})
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    # THEN two ran as steps of their own, the third was answered in one step without running
    assert run.status == "completed"
    assert len([step for step in run.attempts if step.startswith("tool-")]) == 2
    assert "refuse-calls-0" in run.attempts
    answers = [(m.status, str(m.content)) for m in await tool_messages(database_url, chat_id)]
    assert answers[:2] == [("success", "2"), ("success", "4")]
    assert answers[2][0] == "error"
    assert answers[2][1].startswith("Error: this call was not run: at most 2 tool calls")
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    progress = message["metadata"]["snapshot"]["progress"]
    assert [p["status"] for p in progress] == ["completed", "completed", "error"]


async def test_a_call_past_the_limit_leaves_its_arguments_out_of_the_plan(
    database_url: str,
) -> None:
    # GIVEN one call allowed per round, and a second round whose refused call carries 12 KB
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, max_parallel_tool_calls=1) as stack:
        padding = "x" * 12_000
        content = f'/calc 1+1\n/then\n/calc 2+2\n/calc {{"input": "3+3", "pad": "{padding}"}}'
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": content})
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    # THEN the plan that names it (the first model round's output) stays small: the call is
    # answered without running, so its arguments need not travel
    assert run.status == "completed", run.error
    assert run.step_bytes["model-round-0"] < 1024
    answers = [(m.status, str(m.content)) for m in await tool_messages(database_url, chat_id)]
    assert answers[:2] == [("success", "2"), ("success", "4")]
    assert answers[2][0] == "error"


async def test_a_tool_past_its_time_budget_is_stopped_and_answered(database_url: str) -> None:
    # GIVEN tools that may run 0.5 s, and a model that asks for a 30 s sleep and a sum
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, tool_timeout_s=0.5) as stack:
        content = "/sleep 30\n/calc 6*7"
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": content})
        await stack.executor.wait_idle(timeout=20)
        run = stack.handoff_run()
        history = await stack.messages(token_for(user_id), chat_id)
    # THEN the sleep was stopped on its first attempt, not retried, and the turn went on
    assert run.status == "completed", run.error
    sleep_id, calc_id = [m.tool_call_id for m in await tool_messages(database_url, chat_id)]
    assert run.attempts[f"tool-{sleep_id}"] == 1
    # AND the model read that it took too long
    answers = [(m.status, str(m.content)) for m in await tool_messages(database_url, chat_id)]
    assert answers == [
        ("error", "Error: sleep took longer than 0.5 s and was stopped."),
        ("success", "42"),
    ]
    # AND the user sees the sleep failed, and why
    [reply] = [m for m in history if m["role"] == "assistant"]
    assert reply["status"] == "completed"
    assert reply["progress"] == [
        {
            "id": sleep_id,
            "name": "sleep",
            "status": "error",
            "note": "Stopped: it took longer than 0.5 s.",
        },
        {"id": calc_id, "name": "calc", "status": "completed"},
    ]
