"""An enqueued turn whose steps run again continues from what is stored.

A message sent with `multitaskStrategy: enqueue` while a background job runs waits, and the
background runs its whole turn when that job ends: its first step (`model-round-opening`) begins
the turn. A step runs again when its output is lost, and a whole job runs again when the
process that ran it died; either way, the turn's calls are its own, not those of a turn that
was canceled, and they are answered by running them. An enqueued edit forks, as it would on the
quick path, when its turn runs.
"""

from __future__ import annotations

import uuid

from langchain_core.messages import HumanMessage, ToolMessage

from agent.graph import UNANSWERED_CALL_TEXT
from tests.support import (
    OUTAGE_SQL,
    Stack,
    create_user_with_chat,
    durable_messages,
    execute,
    fetch,
    running_stack,
    token_for,
    wait_for_row,
)

THREE_CALCS = "/calc 1+1\n/calc 2+2\n/calc 3+3"
THREE_CALCS_REPLY = (
    "Let me use calc for that.\n\n"
    "Here is what I found: calc returned 2. calc returned 4. calc returned 6."
)
COMPLETED_SQL = "select * from message where id = %s and status = 'completed'"


def message(chat_id: uuid.UUID, content: str, strategy: str) -> dict[str, str]:
    return {"chatId": str(chat_id), "content": content, "multitaskStrategy": strategy}


async def enqueue_behind_a_running_job(
    stack: Stack, database_url: str, content: str
) -> tuple[uuid.UUID, str, str]:
    """A chat whose background job runs a tool, and `content` enqueued behind it: the chat, the
    enqueued reply's id and its job's event id."""
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    first = await stack.respond(token, message(chat_id, "/sleep 0.3", "reject"))
    assert first[-1][0] == "handoff"
    await wait_for_row(database_url, "select 1 from job_runs where status = 'processing'")
    queued = await stack.respond(token, message(chat_id, content, "enqueue"))
    assert queued[-1][1]["status"] == "queued"
    return chat_id, str(queued[-1][1]["assistantMessageId"]), str(queued[-1][1]["eventId"])


async def test_an_enqueued_turn_whose_opening_round_runs_again_runs_its_own_calls(
    database_url: str,
) -> None:
    async with running_stack(database_url) as stack:
        # GIVEN a turn enqueued behind a running job, whose opening round makes three calls,
        # WHEN that round's output is lost once after it was stored, so that it runs again
        stack.executor.drop_step_output("model-round-opening")
        chat_id, reply_id, _ = await enqueue_behind_a_running_job(stack, database_url, THREE_CALCS)
        reply = await wait_for_row(database_url, COMPLETED_SQL, reply_id)
        await stack.executor.wait_idle()
        [run] = [r for r in stack.executor.runs() if "model-round-opening" in r.attempts]
        assert run.attempts["model-round-opening"] == 2

    # THEN the reply answers from all three calls, run
    assert reply["content"] == THREE_CALCS_REPLY
    assert [p["status"] for p in reply["metadata"]["snapshot"]["progress"]] == ["completed"] * 3
    # AND the thread holds the turn once, every call answered once by its result
    thread = await durable_messages(database_url, chat_id)
    answers = [m for m in thread if isinstance(m, ToolMessage)]
    assert UNANSWERED_CALL_TEXT not in [m.content for m in answers]
    assert [m.content for m in answers[-3:]] == ["2", "4", "6"]
    assert len({m.tool_call_id for m in answers}) == len(answers)
    assert [m.content for m in thread if isinstance(m, HumanMessage)] == ["/sleep 0.3", THREE_CALCS]
    results = await fetch(database_url, "select name from handoff.tool_results where name = 'calc'")
    assert len(results) == 3


CALCS_AND_SLEEP = "/calc 1+1\n/calc 2+2\n/sleep 0.5"


async def test_a_replay_of_a_failed_enqueued_turn_uses_the_results_of_its_calls(
    database_url: str,
) -> None:
    await execute(database_url, OUTAGE_SQL)
    async with running_stack(database_url) as stack:
        # GIVEN an enqueued turn whose calls ran, two of them before the database refused
        # the writes of the round after them, through every retry: the job failed
        chat_id, reply_id, event_id = await enqueue_behind_a_running_job(
            stack, database_url, CALCS_AND_SLEEP
        )
        await wait_for_row(
            database_url, "select count(*) from handoff.tool_results having count(*) = 3"
        )
        await execute(database_url, "insert into database_outage default values")
        await wait_for_row(
            database_url, "select 1 from job_runs where kind = 'turn' and status = 'error'"
        )
        await stack.executor.wait_idle()
        ran = await fetch(database_url, "select * from handoff.tool_results order by created_at")
        assert [r["name"] for r in ran] == ["sleep", "calc", "calc", "sleep"]
        # WHEN the database is back and the failed job is replayed: a fresh run, no memo
        await execute(database_url, "delete from database_outage")
        await stack.executor.replay(event_id)
        reply = await wait_for_row(database_url, COMPLETED_SQL, reply_id)
        await stack.executor.wait_idle()

    # THEN the reply is made of the results the calls stored before the failure
    assert reply["content"] == (
        "Let me use calc, sleep for that.\n\n"
        "Here is what I found: calc returned 2. calc returned 4. sleep returned slept 0.5s."
    )
    thread = await durable_messages(database_url, chat_id)
    answers = [m for m in thread if isinstance(m, ToolMessage)]
    assert UNANSWERED_CALL_TEXT not in [m.content for m in answers]
    assert await fetch(database_url, "select * from handoff.tool_results order by created_at") == (
        ran
    )


async def test_an_enqueued_edit_forks_when_its_turn_runs(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        # GIVEN a message answered, then a background job running a tool
        asked = await stack.respond(token, message(chat_id, "first", "reject"))
        first_id = asked[0][1]["userMessageId"]
        busy = await stack.respond(token, message(chat_id, "/sleep 0.3", "reject"))
        assert busy[-1][0] == "handoff"
        # WHEN the first message is edited with `enqueue` meanwhile
        edit = {**message(chat_id, "first, edited", "enqueue"), "editOf": first_id}
        queued = await stack.respond(token, edit)
        assert queued[-1][1]["status"] == "queued"
        await stack.executor.wait_idle()
    # THEN its turn, run whole in the background, forks the thread where the edited one began
    # (its first turn: an empty thread), on a new branch that replaces it, now active
    edited_id = queued[0][1]["userMessageId"]
    [edited] = await fetch(database_url, "select * from message where id = %s", edited_id)
    assert (edited["metadata"]["editOf"], edited["metadata"]["branchId"]) == (first_id, edited_id)
    [answer] = await fetch(database_url, COMPLETED_SQL, queued[-1][1]["assistantMessageId"])
    assert answer["content"] == 'You said: "first, edited"'
    thread = await durable_messages(database_url, chat_id)
    assert [m.content for m in thread if isinstance(m, HumanMessage)] == ["first, edited"]
    [branch] = await fetch(database_url, "select branch_id from active_branch")
    assert branch["branch_id"] == edited_id
