"""A run in flight survives a new build: its step ids are the memo keys of what it has done.

`tests/events/tool_handoff_run.json` is a `tool-handoff` run recorded with the build before the
job was split by what it does (6361b17): a pause before the first tools, a call that waits for
approval (one wait that ended without its event, then a read, then another wait), two tool calls
in parallel, a question, a pause that held the second round, and the end. A build must name its
steps as that run did, in the same order, and replay it from its memo without running anything.

Recorded with `RECORD_STEP_IDS=1 uv run pytest tests/functions/test_step_ids.py`.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from devkit.local_inngest.runs import RunRecord
from tests.support import (
    Stack,
    create_user_with_chat,
    running_stack,
    token_for,
    wait_for_row,
)

RECORDING = Path(__file__).parent.parent / "events" / "tool_handoff_run.json"
QUESTION = {"question": "Which city?", "options": ["Berlin", "Lisbon"]}
EMAIL = {"to": "ada@example.com", "subject": "Minutes", "body": "See attached."}
CONTENT = f"/calc 1+1\n/send_email {json.dumps(EMAIL)}\n/then\n/ask_user {json.dumps(QUESTION)}"
CALL_ID = re.compile(r"call_[0-9a-f]{12}_\d+_\d+")
# No wait ends on its own unless the test says so: the recording has the reads it asked for.
LONG_WAITS: dict[str, Any] = {"wait_recheck_s": 600, "wait_recheck_max_s": 600}


def named_calls(ops: list[tuple[str, str]]) -> list[list[str]]:
    """The step ids and opcodes, each tool call id named by the order it first appears in."""
    names: dict[str, str] = {}

    def name(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<call {len(names)}>")

    return [[CALL_ID.sub(name, step), op] for step, op in ops]


async def post(stack: Stack, token: str, path: str, body: Any = None) -> None:
    response = await stack.http.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 202, response.text


async def waiting_for(stack: Stack, event: str) -> None:
    await stack.executor.wait_idle()
    assert [w.event for w in stack.executor.waiting()] == [event]


async def run_the_story(stack: Stack, database_url: str) -> RunRecord:
    user_id, chat_id = await create_user_with_chat(database_url)
    token, chat = token_for(user_id), f"/api/chat/{chat_id}"
    # Inngest reaches the app after the pause is asked for: the claim's plan holds it.
    stack.executor.call_delay_s = 2.0
    events = await stack.respond(token, {"chatId": str(chat_id), "content": CONTENT})
    assert events[-1][0] == "handoff"
    await post(stack, token, f"{chat}/pause")
    await waiting_for(stack, "chat/resume")
    stack.executor.call_delay_s = 0.0
    await post(stack, token, f"{chat}/resume")
    await waiting_for(stack, "chat/tool_approval")
    # The first wait for the approval ends without it: a read, then the next wait.
    assert stack.executor.expire_waits() == 1
    await waiting_for(stack, "chat/tool_approval")
    [wait] = stack.executor.waiting()
    call_id = re.search(r"toolCallId == '([^']+)'", wait.expression or "")
    assert call_id is not None
    await post(stack, token, f"{chat}/approvals/{call_id.group(1)}", {"approved": True})
    await waiting_for(stack, "chat/user_answer")
    # A pause asked for while the question is open holds the round after the answer.
    await post(stack, token, f"{chat}/pause")
    [wait] = stack.executor.waiting()
    question_id = re.search(r"questionId == '([^']+)'", wait.expression or "")
    assert question_id is not None
    await post(stack, token, f"{chat}/answers/{question_id.group(1)}", {"answer": "Lisbon"})
    await waiting_for(stack, "chat/resume")
    await post(stack, token, f"{chat}/resume")
    await wait_for_row(
        database_url, "select 1 from message where role = 'assistant' and status = 'completed'"
    )
    await stack.executor.wait_idle()
    return stack.handoff_run()


async def test_a_turn_names_its_steps_as_the_recorded_run_did(database_url: str) -> None:
    async with running_stack(database_url, **LONG_WAITS) as stack:
        run = await run_the_story(stack, database_url)
        event = stack.executor.event(run.event_id)
    assert run.status == "completed", run.error
    if os.environ.get("RECORD_STEP_IDS"):
        recording = {
            "steps": named_calls(list(run.ops)),
            "event": event,
            "memo": dict(run.memo),
            "output": run.output,
        }
        RECORDING.write_text(json.dumps(recording, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(RECORDING.read_text())
    assert named_calls(list(run.ops)) == recorded["steps"]
    assert run.output == recorded["output"] == {"status": "completed", "rounds": 2}


async def test_the_recorded_run_replays_from_its_memo_without_running_a_step(
    database_url: str,
) -> None:
    recorded = json.loads(RECORDING.read_text())
    async with running_stack(database_url, **LONG_WAITS) as stack:
        # The recorded run's event, under an id of its own (the job it names is not here: a
        # step that ran would find nothing to claim).
        event = {**recorded["event"], "id": str(uuid.uuid4())}
        run_id = stack.executor.resume_recorded(event, recorded["memo"])
        run = await stack.executor.wait_run(run_id)
    # Every step was found in the memo: none ran, none was planned, the run ended as recorded.
    assert run.ops == ()
    assert (run.status, run.output) == ("completed", recorded["output"])
