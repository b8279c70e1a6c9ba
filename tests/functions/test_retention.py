"""After a prune, nothing a user can still reach is gone: every branch is switched to and
answered again, a pending approval completes once approved, a paused job resumes, and a second
prune deletes nothing."""

from __future__ import annotations

import uuid
from typing import Any

from tests.api import ok
from tests.support import (
    Stack,
    create_user_with_chat,
    execute,
    fetch,
    running_stack,
    token_for,
    wait_for_row,
)

EMAIL = '/send_email {"to": "ada@example.com", "subject": "Minutes", "body": "See attached."}'
REPLY_SQL = "select * from message where chat_id = %s and role = 'assistant' and status = %s"
ROWS_SQL = """
select (select count(*) from langgraph.checkpoints)
  + (select count(*) from langgraph.checkpoint_blobs)
  + (select count(*) from langgraph.checkpoint_writes)
  + (select count(*) from handoff.tool_results) as n
"""
AGE_SQL = [
    "update langgraph.checkpoints set checkpoint = jsonb_set(checkpoint, '{ts}',"
    " to_jsonb((now() - interval '40 days')::text))",
    "update handoff.tool_results set created_at = now() - interval '40 days'",
]


async def say(stack: Stack, token: str, chat_id: uuid.UUID, content: str, **body: Any) -> str:
    """The reply's id, once the turn is done (the background's too)."""
    events = await stack.respond(token, {"chatId": str(chat_id), "content": content, **body})
    reply: str = events[0][1]["assistantMessageId"]
    await wait_for_row(
        stack.database_url, "select 1 from message where id = %s and status = 'completed'", reply
    )
    await stack.executor.wait_idle()
    return reply


async def prune(stack: Stack) -> dict[str, int]:
    run_id = stack.executor.fire(f"{stack.settings.inngest_app_id}-prune-threads")
    await stack.executor.wait_idle()
    [run] = [r for r in stack.executor.runs() if r.run_id == run_id]
    assert run.status == "completed", run
    counts: dict[str, int] = run.output
    return counts


async def rows(database_url: str) -> int:
    [row] = await fetch(database_url, ROWS_SQL)
    return int(row["n"])


async def test_after_a_prune_every_branch_and_pending_prompt_goes_on(database_url: str) -> None:
    async with running_stack(database_url, retention_days=30) as stack:
        # Inngest's latency before each call of /api/inngest: the approval and the resume
        # below are events that waits must catch.
        stack.executor.call_delay_s = 0.05
        # GIVEN a chat whose first turn ran a tool in the background, then edited and
        # regenerated into three branches
        user_id, chat_id = await create_user_with_chat(database_url)
        token = token_for(user_id)
        await say(stack, token, chat_id, "/calc 1+1")
        second_reply = await say(stack, token, chat_id, "second question")
        [*_, second] = await stack.messages(token, chat_id)
        events = await stack.regenerate(token, chat_id, second_reply)
        assert events[-1][0] == "done"
        user_second = second["parentMessageId"]
        await say(stack, token, chat_id, "second, edited", editOf=user_second)
        # AND a chat waiting for an approval, and one whose job is paused
        approver, approving = await create_user_with_chat(database_url)
        events = await stack.respond(
            token_for(approver), {"chatId": str(approving), "content": EMAIL}
        )
        awaiting = await wait_for_row(database_url, REPLY_SQL, approving, "awaiting_approval")
        pauser, pausing = await create_user_with_chat(database_url)
        events = await stack.respond(
            token_for(pauser), {"chatId": str(pausing), "content": "/calc 1+1\n/then\n/calc 2+2"}
        )
        assert events[-1][0] == "handoff"
        ok(await stack.pause(token_for(pauser), pausing), 202)
        await wait_for_row(database_url, REPLY_SQL, pausing, "paused")
        await stack.executor.wait_idle()
        # AND everything is older than RETENTION_DAYS
        for statement in AGE_SQL:
            await execute(database_url, statement)
        stored = await rows(database_url)

        # WHEN the daily prune runs
        pruned = await prune(stack)

        # THEN rows went
        assert pruned["checkpoints"] > 0, pruned
        assert pruned["tool_results"] > 0, pruned
        assert await rows(database_url) == stored - sum(pruned.values())
        # AND every branch is switched to and answered again
        branches = (await stack.branches(token, chat_id))["branches"]
        assert len(branches) == 3
        for branch in branches:
            ok(await stack.activate(token, chat_id, branch["id"]))
            latest = branch["latestMessage"]["id"]
            events = await stack.regenerate(token, chat_id, latest)
            assert events[-1][0] == "done", events
            assert "second" in events[-1][1]["content"]
        # AND the approval, once given, completes its turn
        call_id = awaiting["metadata"]["pendingApproval"]["toolCallId"]
        ok(await stack.approve(token_for(approver), approving, call_id, approved=True), 202)
        done = await wait_for_row(database_url, REPLY_SQL, approving, "completed")
        assert "Email to ada@example.com sent (simulated)" in done["content"]
        # AND the paused job, resumed, completes
        ok(await stack.resume(token_for(pauser), pausing), 202)
        done = await wait_for_row(database_url, REPLY_SQL, pausing, "completed")
        assert "calc returned 4." in done["content"]
        await stack.executor.wait_idle()

        # AND, aged again, a second prune deletes only what the turns since left behind
        for statement in AGE_SQL:
            await execute(database_url, statement)
        await prune(stack)
        assert await prune(stack) == {"checkpoints": 0, "blobs": 0, "writes": 0, "tool_results": 0}
