"""The control routes when their event cannot be sent: what the user asked for still stands.

A cancel, an approval, an answer and a resume are stored before their event is sent, and the
run finds them without it (functions/wakes.py), so a send that fails is logged and the route
answers as it would have. The in-process app's Inngest is a port nobody listens on.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support import create_user_with_chat, execute, fetch, in_process_app, token_for

SEED_JOB_SQL = """
insert into public.job_runs
  (chat_id, root_message_id, status, kind, event_name, idempotency_key, payload)
values (%s, %s, %s, 'handoff', 'chat/tool_handoff', %s, '{}')
"""
SEED_REPLY_SQL = """
insert into public.message (id, chat_id, role, content, status, metadata)
values (%s, %s, 'assistant', 'so far', %s, %s::jsonb)
"""


@dataclass(frozen=True)
class Case:
    reply_status: str  # the reply, as the background job left it
    metadata: str
    job_status: str
    path: str  # under /api/chat/{chat id}
    body: dict[str, Any] | None
    event: str
    answered: dict[str, Any]  # the response's body, but the reply's id
    stored: Callable[[dict[str, Any]], Any]  # what the request stored, read from the reply
    expected: Any


CASES = {
    "cancel": Case(
        "streaming",
        "{}",
        "processing",
        "/cancel",
        None,
        "chat/cancel",
        {"canceled": True},
        lambda reply: reply["status"],
        "canceled",
    ),
    "approval": Case(
        "awaiting_approval",
        '{"pendingApproval": {"toolCallId": "call-1"}}',
        "paused",
        "/approvals/call-1",
        {"approved": True},
        "chat/tool_approval",
        {"toolCallId": "call-1", "approved": True},
        lambda reply: reply["metadata"]["approvals"]["call-1"]["approved"],
        True,
    ),
    "answer": Case(
        "awaiting_input",
        '{"pendingQuestion": {"questionId": "ask-1"}}',
        "paused",
        "/answers/ask-1",
        {"answer": "blue"},
        "chat/user_answer",
        {"questionId": "ask-1", "answered": True},
        lambda reply: reply["metadata"]["answers"]["ask-1"]["answer"],
        "blue",
    ),
    "resume": Case(
        "paused",
        "{}",
        "paused",
        "/resume",
        None,
        "chat/resume",
        {"resumed": True},
        lambda reply: reply["status"],
        "streaming",
    ),
}


@pytest.mark.parametrize("name", CASES)
async def test_a_control_request_stands_when_its_event_cannot_be_sent(
    database_url: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    case = CASES[name]
    # GIVEN a chat whose background job waits as the route expects (or runs, for a cancel)
    user_id, chat_id = await create_user_with_chat(database_url)
    reply = uuid.uuid4()
    await execute(database_url, SEED_REPLY_SQL, reply, chat_id, case.reply_status, case.metadata)
    await execute(database_url, SEED_JOB_SQL, chat_id, reply, case.job_status, str(uuid.uuid4()))

    # WHEN the user sends the request while Inngest cannot be reached
    caplog.set_level(logging.ERROR, logger="infra.events")
    async with in_process_app(database_url) as api:
        response = await api.http.post(
            f"/api/chat/{chat_id}{case.path}",
            json=case.body,
            headers={"Authorization": f"Bearer {token_for(user_id)}"},
        )

    # THEN it is accepted as ever, and what it asked for is stored for the run to find
    assert response.status_code == 202, response.text
    body = response.json()
    assert body.pop("assistantMessageId", str(reply)) == str(reply)
    assert body == case.answered
    [row] = await fetch(
        database_url, "select status, metadata from public.message where id = %s", reply
    )
    assert case.stored(row) == case.expected
    # AND the lost event is logged, by name, with the chat
    [record] = [r for r in caplog.records if r.getMessage() == f"{case.event} not sent"]
    assert record.chat_id == str(chat_id)  # type: ignore[attr-defined]
