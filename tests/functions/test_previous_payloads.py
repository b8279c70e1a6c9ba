"""A `chat/tool_handoff` event and a job payload in the shape a previous build wrote them.

Runs in flight and jobs waiting in the outbox across a deploy carry the turn as the build that
handed it off serialized it: the reply under `rootMessageId`, the model spec under
`modelConfig`. `tests/events/tool_handoff_event_v1.json` is such an event, exactly as that build
sent it, with this test's ids filled in; the build under test must run it to the end.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from agent.threads import thread_key
from tests.support import create_user_with_chat, execute, fetch, running_stack, token_for
from turns.turn import Turn

RECORDED = Path(__file__).parent.parent / "events" / "tool_handoff_event_v1.json"
LATEST_CHECKPOINT_SQL = """
select checkpoint_id from langgraph.checkpoints
where thread_id = %s and checkpoint_ns = '' order by checkpoint_id desc limit 1
"""


def recorded_event(ids: dict[str, str]) -> dict[str, Any]:
    text = RECORDED.read_text()
    for name, value in ids.items():
        text = text.replace("{" + name + "}", value)
    event: dict[str, Any] = json.loads(text)
    return event


async def test_a_handoff_event_and_payload_of_the_previous_shape_run_to_the_end(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        # GIVEN a turn handed off whose event is still in the outbox (Inngest refused it)
        stack.executor.refuse_events(5)
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 6*7"}
        )
        assert events[-1][0] == "handoff"
        # AND its job's payload and its event as the previous build wrote them
        [job] = await fetch(database_url, "select idempotency_key from job_runs")
        [user] = await fetch(database_url, "select id from message where role = 'user'")
        [checkpoint] = await fetch(
            database_url, LATEST_CHECKPOINT_SQL, thread_key(chat_id, "default")
        )
        event = recorded_event(
            {
                "job_key": job["idempotency_key"],
                "chat_id": str(chat_id),
                "user_id": str(user_id),
                "reply_id": str(events[-1][1]["assistantMessageId"]),
                "user_message_id": str(user["id"]),
                "checkpoint_id": checkpoint["checkpoint_id"],
            }
        )
        await execute(
            database_url,
            "update job_runs set payload = %s where idempotency_key = %s",
            Jsonb(event["data"]),
            job["idempotency_key"],
        )
        # WHEN this build's function receives that event
        stack.executor.send(event)
        await stack.executor.wait_idle()
        run = stack.handoff_run()

    # THEN the reply the user waits for is answered, as the previous build would have
    assert run.status == "completed"
    [reply] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert str(reply["id"]) == events[-1][1]["assistantMessageId"]
    assert reply["status"] == "completed"
    assert "calc returned 42." in reply["content"]
    [job] = await fetch(database_url, "select status from job_runs")
    assert job["status"] == "completed"


def test_a_turn_read_from_the_previous_shape_is_written_back_in_it() -> None:
    ids = {"job_key": "k", "checkpoint_id": "1f0-checkpoint"} | {
        name: str(uuid.uuid4()) for name in ("chat_id", "user_id", "reply_id", "user_message_id")
    }
    data = recorded_event(ids)["data"]

    turn = Turn.model_validate(data)

    assert (str(turn.reply_id), turn.model_spec) == (ids["reply_id"], data["modelConfig"])
    # A run of the previous build, or a rollback, reads what this one stores and sends: all of
    # it but the message's text, which stays in the message row alone (a handed-off turn never
    # read it; the background reads a waiting turn's from the row).
    assert turn.to_data() == {k: v for k, v in data.items() if k != "content"}
