"""Resuming a checkpoint another version wrote: refused clearly, or resumed when compatible."""

from __future__ import annotations

import uuid

import psycopg

from agent.snapshot import INCOMPATIBLE_VERSION
from agent.state import SCHEMA_VERSION
from agent.threads import thread_key
from tests.support import Stack, create_user_with_chat, fetch, running_stack, token_for

# What a build writes into every checkpoint's metadata (the language of a migration script).
SET_VERSION_SQL = """
update langgraph.checkpoints
set metadata = case when %(version)s::int is null then metadata - 'schema_version'
                    else jsonb_set(metadata, '{schema_version}', to_jsonb(%(version)s::int)) end
where thread_id = %(thread_id)s
"""


async def hand_off_with_checkpoints_of(
    stack: Stack, database_url: str, version: int | None
) -> uuid.UUID:
    """A turn handed off to the background, its checkpoints rewritten as `version` wrote them
    before the function resumes them (the event waits in the outbox meanwhile)."""
    user_id, chat_id = await create_user_with_chat(database_url)
    stack.executor.refuse_events(5)  # every try the SDK makes: the job stays in the outbox
    events = await stack.respond(
        token_for(user_id), {"chatId": str(chat_id), "content": "/calc 6*7"}
    )
    assert events[-1][0] == "handoff"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            SET_VERSION_SQL, {"version": version, "thread_id": thread_key(chat_id, "default")}
        )
    stack.executor.fire(f"{stack.settings.inngest_app_id}-outbox-relay")
    await stack.executor.wait_idle()
    return chat_id


async def test_a_checkpoint_from_a_newer_version_fails_once_with_a_clear_message(
    database_url: str,
) -> None:
    async with running_stack(database_url, outbox_grace_s=0) as stack:
        await hand_off_with_checkpoints_of(stack, database_url, SCHEMA_VERSION + 1)
        run = stack.handoff_run()

    # No retries: another attempt would read the same checkpoint.
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "NonRetriableError"
    assert set(run.attempts.values()) == {1}
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    # What the quick path showed stays, the plain words after it.
    ended = f"Let me use calc for that.\n\n({INCOMPATIBLE_VERSION})"
    assert (message["status"], message["content"]) == ("error", ended)
    [job] = await fetch(database_url, "select * from job_runs")
    assert job["status"] == "error"
    assert job["error"] == "incompatible_version"
    # The run itself says which version it met, for the operator.
    assert f"schema version {SCHEMA_VERSION + 1}" in run.error["message"]
    assert await fetch(database_url, "select * from handoff.tool_results") == []


async def test_a_checkpoint_from_before_versions_were_recorded_resumes(database_url: str) -> None:
    async with running_stack(database_url, outbox_grace_s=0) as stack:
        await hand_off_with_checkpoints_of(stack, database_url, None)
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    assert "calc returned 42." in message["content"]


async def test_every_checkpoint_records_the_version_that_wrote_it(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "/calc 1+1"})
        await stack.executor.wait_idle()
    rows = await fetch(database_url, "select metadata from langgraph.checkpoints")
    # (the quick path's handoff point, and the background round's end)
    assert len(rows) == 2
    assert {row["metadata"].get("schema_version") for row in rows} == {SCHEMA_VERSION}


async def test_a_new_message_on_an_unreadable_thread_gets_a_clear_error(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        await stack.respond(token, {"chatId": str(chat_id), "content": "hello"})
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            params = {"version": SCHEMA_VERSION + 1, "thread_id": thread_key(chat_id, "default")}
            await conn.execute(SET_VERSION_SQL, params)
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "and now?"})
        assert [name for name, _ in events][-1] == "error"
    assert events[-1][1] == {"code": "incompatible_version", "message": INCOMPATIBLE_VERSION}
    assert not any(name == "token" for name, _ in events)
    replies = await fetch(
        database_url,
        "select status, content from message where role = 'assistant' order by created_at",
    )
    assert replies[-1] == {"status": "error", "content": INCOMPATIBLE_VERSION}
    # The chat is not blocked: the failed turn gave its slot back.
    jobs = await fetch(database_url, "select status from job_runs order by created_at")
    assert [j["status"] for j in jobs] == ["completed", "error"]
