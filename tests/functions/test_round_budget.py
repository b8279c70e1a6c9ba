"""A background model round ends within its time budget, is counted when it runs again, and
never makes its reply's draft go backwards."""

from __future__ import annotations

from itertools import pairwise

from agent.snapshot import CUT_SHORT_TEXT
from tests.support import (
    DRAFT_LOG_SQL,
    create_user_with_chat,
    execute,
    fetch,
    running_stack,
    token_for,
)


async def test_a_round_past_its_budget_ends_cleanly_with_what_it_streamed(
    database_url: str,
) -> None:
    await execute(database_url, DRAFT_LOG_SQL)
    user_id, chat_id = await create_user_with_chat(database_url)
    # GIVEN rounds that may stream for 0.4 s, and a round that would take ~10 s (it quotes a
    # long report word by word at 40 ms a word)
    async with running_stack(
        database_url, scripted_token_delay_ms=40, round_budget_s=0.4, quick_budget_s=30
    ) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/report 1"}
        )
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle(timeout=30)
        run = stack.handoff_run()
    # THEN the round stopped at its budget, once: no step failed or ran again
    assert run.status == "completed"
    assert set(run.attempts.values()) == {1}
    # AND the reply is what the round had streamed, then a plain note, and it is completed
    [reply] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert reply["status"] == "completed"
    assert reply["metadata"]["snapshot"]["cutShort"] == "time"
    streamed, note = reply["content"].rsplit("\n\n", 1)
    assert note == CUT_SHORT_TEXT["time"]
    assert streamed.startswith("Let me use report for that.\n\nHere is what I found:")
    assert len(streamed.split()) < 60
    # AND every draft showed a beginning of it
    writes = await fetch(database_url, "select * from draft_write_log order by at")
    assert all(streamed.startswith(w["draft_content"]) for w in writes)


# A draft write half-way through the round fails, once: its step fails and runs again.
FAIL_ONE_DRAFT_WRITE_SQL = """
create sequence draft_write_failures;  -- a sequence: the failing write's rollback keeps it
create function fail_one_draft_write() returns trigger language plpgsql as $$
begin
  if strpos(new.draft_content, 'Report line 00005') > 0
     and nextval('draft_write_failures') = 1 then
    raise exception 'the database refuses this write';
  end if;
  return new;
end $$;
create trigger fail_one_draft_write before insert or update on public.message_draft
  for each row execute function fail_one_draft_write();
"""


async def test_a_round_run_again_is_counted_and_its_draft_never_shrinks(
    database_url: str,
) -> None:
    await execute(database_url, DRAFT_LOG_SQL)
    await execute(database_url, FAIL_ONE_DRAFT_WRITE_SQL)
    user_id, chat_id = await create_user_with_chat(database_url)
    # GIVEN a round that fails half-way (a draft write refused, once): its step runs again,
    # from the text before the round
    async with running_stack(database_url, scripted_token_delay_ms=5) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/report 1.1"}
        )
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle(timeout=60)
        assert stack.handoff_run().attempts["model-round-0"] == 2
    # THEN the reply completes once, and the job says its round ran again
    [reply] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert reply["status"] == "completed"
    [job] = await fetch(database_url, "select * from job_runs")
    assert job["metadata"]["roundReruns"] == 1
    # AND no draft showed less than one before it, although the second attempt started over
    writes = await fetch(database_url, "select * from draft_write_log order by at")
    lengths = [len(w["draft_content"]) for w in writes]
    assert all(a <= b for a, b in pairwise(lengths)), lengths
    assert writes[-1]["draft_content"] == reply["content"]
