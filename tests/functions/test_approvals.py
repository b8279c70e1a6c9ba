"""Tools that need approval: the job asks, waits for chat/tool_approval, and goes on."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.api import ok
from tests.support import (
    Stack,
    create_user_with_chat,
    fetch,
    running_stack,
    token_for,
    wait_for_row,
)

EMAIL = '/send_email {"to": "ada@example.com", "subject": "Minutes", "body": "See attached."}'
AWAITING_SQL = "select * from message where role = 'assistant' and status = 'awaiting_approval'"
FINISHED_SQL = "select * from message where role = 'assistant' and status = 'completed'"


async def ask_for_email(stack: Stack, database_url: str) -> tuple[str, uuid.UUID, dict[str, Any]]:
    """A turn whose tool call waits for approval: (token, chat id, the pending call)."""
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    events = await stack.respond(token, {"chatId": str(chat_id), "content": EMAIL})
    assert events[-1][0] == "handoff"
    message = await wait_for_row(database_url, AWAITING_SQL)
    return token, chat_id, message["metadata"]["pendingApproval"]


async def test_an_approved_call_runs_the_tool(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        # GIVEN a background job waiting for approval of an email
        token, chat_id, pending = await ask_for_email(stack, database_url)
        assert pending["name"] == "send_email"
        assert pending["args"] == {
            "to": "ada@example.com",
            "subject": "Minutes",
            "body": "See attached.",
        }
        assert "expiresAt" in pending
        # The tool has not run while the question is open.
        assert await fetch(database_url, "select * from handoff.tool_results") == []
        # A page loaded now finds the question in the history too.
        waiting = (await stack.messages(token, chat_id))[-1]
        assert (waiting["status"], waiting["pendingApproval"]) == ("awaiting_approval", pending)

        # WHEN the user approves it
        approved = await stack.approve(token, chat_id, pending["toolCallId"], approved=True)
        assert ok(approved, 202) == {"toolCallId": pending["toolCallId"], "approved": True}
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()

    # THEN the email went out once and the answer says so
    assert "Email to ada@example.com sent (simulated)" in message["content"]
    assert "pendingApproval" not in message["metadata"]
    decision = message["metadata"]["approvals"][pending["toolCallId"]]
    assert decision == {"approved": True, "note": None, "timed_out": False}
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert result["content"].startswith("Email to ada@example.com sent")


async def test_a_rejected_call_is_reported_to_the_model_with_the_note(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id, pending = await ask_for_email(stack, database_url)
        rejected = await stack.approve(
            token, chat_id, pending["toolCallId"], approved=False, note="Not to Ada."
        )
        ok(rejected, 202)
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
    assert "The user rejected this call, so send_email was not run." in message["content"]
    assert "Not to Ada." in message["content"]
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert "sent" not in result["content"]


async def test_no_answer_in_time_lets_the_model_go_on_without_the_tool(database_url: str) -> None:
    async with running_stack(database_url, approval_timeout_s=1) as stack:
        _, _, pending = await ask_for_email(stack, database_url)
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
    assert "No answer from the user in time, so send_email was not run." in message["content"]
    decision = message["metadata"]["approvals"][pending["toolCallId"]]
    assert decision["timed_out"] is True


async def test_decisions_come_only_from_the_owner_once(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id, pending = await ask_for_email(stack, database_url)
        call_id = pending["toolCallId"]
        stranger, stranger_chat = await create_user_with_chat(database_url)
        # Another user can neither decide in this chat nor reach the call from their own.
        for chat in (chat_id, stranger_chat):
            refused = await stack.approve(token_for(stranger), chat, call_id, approved=True)
            assert ok(refused, 404)["error"]["code"] == "approval_not_found"
        ok(await stack.approve(token, chat_id, "call_unknown", approved=True), 404)
        ok(await stack.approve(token, chat_id, call_id, approved="maybe"), 422)
        ok(await stack.approve(token, chat_id, "bad'id", approved=True), 422)

        ok(await stack.approve(token, chat_id, call_id, approved=False), 202)
        again = await stack.approve(token, chat_id, call_id, approved=True)
        assert again.status_code in (404, 409), again.text
        assert "error" in again.json()  # decided, and possibly already settled by the job
        await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
    [message] = await fetch(database_url, "select metadata from message where role = 'assistant'")
    assert message["metadata"]["approvals"][call_id]["approved"] is False


async def test_cancel_while_awaiting_approval_never_runs_the_tool(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        token, chat_id, pending = await ask_for_email(stack, database_url)
        assert (await stack.cancel(token, chat_id)).status_code == 202
        ok(await stack.approve(token, chat_id, pending["toolCallId"], approved=True), 404)
        await wait_for_row(
            database_url, "select 1 from message where role = 'assistant' and status = 'canceled'"
        )
    assert await fetch(database_url, "select * from handoff.tool_results") == []


@pytest.mark.parametrize(
    "address",
    [
        pytest.param("ada", id="no-at-sign"),
        pytest.param("ada@localhost", id="no-domain-dot"),
        pytest.param("Ada <ada@example.com>", id="display-name"),
        pytest.param("ada@exam\u202eple.com", id="bidi-override"),
        pytest.param("ada\u200b@example.com", id="zero-width"),
    ],
)
async def test_a_call_to_an_invalid_address_is_the_models_to_fix_not_the_users(
    database_url: str, address: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    args = {"to": address, "subject": "Minutes"}
    async with running_stack(database_url) as stack:
        # WHEN the model asks to send an email to something that is not an address
        events = await stack.respond(
            token_for(user_id),
            {"chatId": str(chat_id), "content": f"/send_email {json.dumps(args)}"},
        )
        assert events[-1][0] == "handoff"
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    # THEN nobody was asked to approve it: no question, no decision, no approval step
    assert not any("approval" in step for step in run.attempts), run.attempts
    assert {"pendingApproval", "approvals"}.isdisjoint(message["metadata"])
    # AND the model got an error result saying what is wrong, and the turn went on
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert result["status"] == "error"
    assert result["content"].startswith("Error: invalid arguments for send_email: to: ")
    assert "Fix them and call again." in result["content"]
    assert "sent (simulated)" not in message["content"]
    assert "invalid arguments for send_email" in message["content"]


async def test_the_question_shows_every_hidden_character_of_the_arguments(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    # The model's arguments carry a bidi override and a zero-width space: the attachment that
    # reads "invoiceexe.pdf" is an .exe.
    args = {"to": "ada@example.com", "subject": "invoice\u202efdp.exe", "body": "pay\u200bnow"}
    async with running_stack(database_url) as stack:
        events = await stack.respond(
            token, {"chatId": str(chat_id), "content": f"/send_email {json.dumps(args)}"}
        )
        assert events[-1][0] == "handoff"
        message = await wait_for_row(database_url, AWAITING_SQL)
        pending = message["metadata"]["pendingApproval"]
        listed = await stack.messages(token, chat_id)
        ok(await stack.approve(token, chat_id, pending["toolCallId"], approved=False), 202)
        await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
    # THEN the call is kept as the model made it, and shown with both characters made visible
    assert pending["args"] == args
    shown = pending["display"]
    assert '"subject": "invoice\\u202efdp.exe"' in shown
    assert '"body": "pay\\u200bnow"' in shown
    assert "\u202e" not in shown
    assert "\u200b" not in shown
    assert json.loads(shown) == args
    # AND every frontend gets it, whether from Realtime's row or the history
    assert listed[-1]["pendingApproval"] == pending
