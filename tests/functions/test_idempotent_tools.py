"""A tool call runs at least once: its id is the idempotency key of what the tool does outside.

The job stores each call's result and reuses it, but a process that dies after the tool ran and
before its result was stored leaves nothing to reuse: the retried step runs the tool again. Here
Postgres refuses the first result's insert, as the crash would leave it: the step has run the
tool, its result is not stored, and the executor retries the step.
"""

from __future__ import annotations

import json
import uuid

from demo.mail import MAILER
from tests.support import (
    create_user_with_chat,
    execute,
    fetch,
    running_stack,
    token_for,
    wait_for_row,
)

# A sequence, not a table: its count survives the rollback of the insert it fails.
LOSE_FIRST_RESULT_SQL = """
create sequence result_inserts;
create function lose_first_result() returns trigger language plpgsql as $$
begin
  if nextval('result_inserts') = 1 then
    raise exception 'the process died before the result was stored';
  end if;
  return new;
end $$;
create trigger lose_first_result before insert on handoff.tool_results
  for each row execute function lose_first_result();
"""
AWAITING_SQL = "select * from message where role = 'assistant' and status = 'awaiting_approval'"
FINISHED_SQL = "select * from message where role = 'assistant' and status = 'completed'"


async def test_an_email_whose_call_runs_twice_is_sent_once(database_url: str) -> None:
    await execute(database_url, LOSE_FIRST_RESULT_SQL)
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    to = f"ada+{uuid.uuid4().hex[:12]}@example.com"
    args = {"to": to, "subject": "Minutes", "body": "See attached."}
    async with running_stack(database_url) as stack:
        # GIVEN an approved email, whose first run's result is never stored
        events = await stack.respond(
            token, {"chatId": str(chat_id), "content": f"/send_email {json.dumps(args)}"}
        )
        assert events[-1][0] == "handoff"
        pending = (await wait_for_row(database_url, AWAITING_SQL))["metadata"]["pendingApproval"]
        call_id = pending["toolCallId"]
        approved = await stack.approve(token, chat_id, call_id, approved=True)
        assert approved.status_code == 202, approved.text
        # WHEN the tool step is retried, and runs the tool again
        message = await wait_for_row(database_url, FINISHED_SQL)
        await stack.executor.wait_idle()
        assert stack.handoff_run().attempts[f"tool-{call_id}"] == 2

    # THEN one email went out, though the tool asked the mail service twice, with the call's
    # id as the key both times
    [email] = MAILER.sent_to(to)
    assert (email.subject, email.body) == ("Minutes", "See attached.")
    assert MAILER.requests(call_id) == 2
    # AND the reply says it was sent, from the one stored result
    assert message["content"].count(f"Email to {to} sent (simulated)") == 1
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert result["tool_call_id"] == call_id
