"""What a user deletes is gone: a canary planted in a turn that hands off (its tool's large output
sent to S3) is found nowhere, in no table of any schema and not in the bucket, once the chat,
the turn's messages or the user is deleted, each the way a user or an operator can."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Literal, get_args

import psycopg
import pytest
from langchain_core.tools import tool
from mypy_boto3_s3 import S3Client
from psycopg import sql

from demo.assistants import ASSISTANTS as DEMO_ASSISTANTS
from tests.api import Api, ok
from tests.support import (
    TOOL_OUTPUT_BUCKET,
    create_user_with_chat,
    durable_messages,
    execute,
    fetch,
    helper_with,
    running_stack,
    stored_objects,
    token_for,
)

BUCKET = TOOL_OUTPUT_BUCKET
Way = Literal[
    "chat_through_the_api",
    "messages_through_the_api",
    "chat_by_its_owner",
    "messages_by_their_owner",
    "user_row",
]

# Every table of every schema, each row as text: a bytea column shows its bytes in hex.
TABLES_SQL = """
select n.nspname, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'p') and n.nspname not in ('pg_catalog', 'information_schema')
"""


@tool
def leak(input: str) -> str:
    """Repeat the input until it is large."""
    return (input + "\n") * 40_000


async def tables_holding(database_url: str, canary: str) -> list[str]:
    """The tables with a row whose text, or whose bytes, hold `canary`."""
    found = []
    hex_canary = canary.encode().hex()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for schema, table in await (await conn.execute(TABLES_SQL)).fetchall():
            query = sql.SQL(
                "select exists (select 1 from {t} r where r::text like %s or r::text like %s)"
            ).format(t=sql.Identifier(schema, table))
            row = await (await conn.execute(query, (f"%{canary}%", f"%{hex_canary}%"))).fetchone()
            if row is not None and row[0]:
                found.append(f"{schema}.{table}")
    return found


def objects_holding(s3: S3Client, canary: str) -> list[str]:
    return [key for key, body in stored_objects(s3).items() if canary.encode() in body]


async def delete_through_the_api(
    stack: Api, way: Way, user_id: uuid.UUID, chat_id: uuid.UUID
) -> None:
    """DELETE the chat, or each of its messages, through the HTTP API."""
    token = token_for(user_id)
    if way == "chat_through_the_api":
        paths = [f"/api/chats/{chat_id}"]
    else:
        messages = await fetch(
            stack.database_url, "select id from message where chat_id = %s", chat_id
        )
        paths = [f"/api/chat/{chat_id}/messages/{m['id']}" for m in messages]
    for path in paths:
        response = await stack.call("DELETE", path, token)
        assert response.status_code == 204, response.text


async def delete(database_url: str, way: Way, user_id: uuid.UUID, chat_id: uuid.UUID) -> None:
    """Delete as a Supabase client can (the Data API: the owner's role under RLS), or as an
    operator deleting the user's `auth.users` row."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        if way == "user_row":
            await conn.execute("delete from auth.users where id = %s", (user_id,))
        else:
            claims = f'{{"sub": "{user_id}", "role": "authenticated"}}'
            await conn.execute("select set_config('request.jwt.claims', %s, true)", (claims,))
            await conn.execute("set local role authenticated")
            table = "chat" if way == "chat_by_its_owner" else "message"
            column = "id" if way == "chat_by_its_owner" else "chat_id"
            deleted = await conn.execute(
                sql.SQL("delete from public.{} where {} = %s").format(
                    sql.Identifier(table), sql.Identifier(column)
                ),
                (chat_id,),
            )
            assert deleted.rowcount > 0
        await conn.commit()


@pytest.mark.parametrize("way", get_args(Way))
async def test_a_deleted_turn_leaves_no_copy_anywhere(
    database_url: str, s3: S3Client, way: Way
) -> None:
    # GIVEN a turn that handed off, whose tool's large output went to S3, all holding a canary
    canary = f"passport-{uuid.uuid4().hex}"
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(
        database_url, assistants=helper_with([leak]), large_output_bucket=BUCKET
    ) as stack:
        await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": f"/leak {canary}"}
        )
        await stack.executor.wait_idle()
        assert stack.handoff_run().status == "completed", stack.handoff_run().error
        # (the scan finds it where it was: the thread, the tool result, the bucket)
        holding = await tables_holding(database_url, canary)
        assert {"langgraph.checkpoint_blobs", "handoff.tool_results"} <= set(holding)
        assert objects_holding(s3, canary)
        # AND the job's payload, which is its event's data, carries no text
        [job] = await fetch(database_url, "select payload from public.job_runs")
        assert "content" not in job["payload"]

        # WHEN it is deleted, and the background drains its erasures
        if way.endswith("through_the_api"):
            await delete_through_the_api(stack, way, user_id, chat_id)
        else:
            await delete(database_url, way, user_id, chat_id)
        stack.executor.fire(f"{stack.settings.inngest_app_id}-erase-objects")
        await stack.executor.wait_idle()

    # THEN no table of any schema holds it, nor does the bucket
    assert await tables_holding(database_url, canary) == []
    assert objects_holding(s3, canary) == []


@tool
def slow(input: str) -> str:
    """Answer after a while."""
    time.sleep(1.0)
    return f"slowly {input}"


THREAD_ROWS_SQL = """
select (select count(*) from langgraph.checkpoints where thread_id like %s)
     + (select count(*) from langgraph.checkpoint_writes where thread_id like %s)
     + (select count(*) from handoff.tool_results where thread_id like %s)
     + (select count(*) from public.message where chat_id = %s) as rows
"""


@pytest.mark.parametrize("way", ["chat_by_its_owner", "messages_by_their_owner"])
async def test_a_job_whose_chat_or_reply_is_deleted_stops_and_writes_nothing_back(
    database_url: str, caplog: pytest.LogCaptureFixture, way: Way
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, assistants=helper_with([slow])) as stack:
        # GIVEN a turn handed off, whose tool is running in the background
        token = token_for(user_id)
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "/slow hi"})
        assert events[-1][0] == "handoff"
        await asyncio.sleep(0.5)

        # WHEN its chat, or its messages, are deleted
        with caplog.at_level(logging.INFO):
            await delete(database_url, way, user_id, chat_id)
            await stack.executor.wait_idle()

        # THEN the job stopped at its next step without an error, and wrote nothing back
        run = stack.handoff_run()
    assert run.status == "completed", run.error
    assert run.output["status"] == "stopped"
    thread = f"{chat_id}:%"
    [row] = await fetch(database_url, THREAD_ROWS_SQL, thread, thread, thread, chat_id)
    assert row["rows"] == 0
    # AND the turn no longer counts against the user's limit, which one log line says
    assert await fetch(database_url, "select * from handoff.erased_turn") == []
    stopped = [r for r in caplog.records if "was deleted: stopped" in r.getMessage()]
    assert len(stopped) == 1
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_deleting_a_message_cuts_its_thread_at_its_turn(database_url: str) -> None:
    canary = f"passport-{uuid.uuid4().hex}"
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with running_stack(database_url) as stack:
        # GIVEN three turns, the second holding a canary
        for content in ("first turn", f"second turn {canary}", "third turn"):
            events = await stack.respond(token, {"chatId": str(chat_id), "content": content})
            assert events[-1][0] == "done"
        [second] = await fetch(
            database_url, "select id from message where content = %s", f"second turn {canary}"
        )

        # WHEN the user deletes the second turn's message through the Data API
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            claims = f'{{"sub": "{user_id}", "role": "authenticated"}}'
            await conn.execute("select set_config('request.jwt.claims', %s, true)", (claims,))
            await conn.execute("set local role authenticated")
            await conn.execute("delete from public.message where id = %s", (second["id"],))
            await conn.commit()

        # THEN no table holds it: every checkpoint that held it is gone, and the later ones
        # with it (the reply that quoted it is the user's to delete; here it is deleted too)
        await execute(database_url, "delete from message where content like %s", f"%{canary}%")
        assert await tables_holding(database_url, canary) == []
        # AND the thread goes on from the turn before it: the agent remembers the first turn
        remembered = [str(m.content) for m in await durable_messages(database_url, chat_id)]
        assert remembered[0] == "first turn"
        assert not any("third turn" in text for text in remembered)
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "fourth turn"})
        assert events[-1][0] == "done"
        remembered = [str(m.content) for m in await durable_messages(database_url, chat_id)]
        assert [remembered[0], remembered[2]] == ["first turn", "fourth turn"]


async def test_deleting_a_message_erases_it_from_every_thread_that_heard_it(
    database_url: str,
) -> None:
    canary = f"passport-{uuid.uuid4().hex}"
    both = [a.id for a in DEMO_ASSISTANTS[:2]]
    owner, chat_id = await create_user_with_chat(database_url, assistants=both)
    member = uuid.uuid4()
    await execute(database_url, "insert into auth.users (id, email) values (%s, %s)", member, "m@e")
    async with running_stack(database_url) as stack:
        ok(await stack.add_member(token_for(owner), chat_id, userId=str(member)), 201)
        # GIVEN a message posted to the shared chat, which both assistants then hear
        posted = await stack.respond(
            token_for(member), {"chatId": str(chat_id), "content": f"hello all {canary}"}
        )
        for assistant in DEMO_ASSISTANTS[:2]:
            body = {
                "chatId": str(chat_id),
                "content": "what was said?",
                "assistantId": assistant.id,
            }
            assert (await stack.respond(token_for(owner), body))[-1][0] == "done"
        heard = [
            str(m.content) for a in both for m in await durable_messages(database_url, chat_id, a)
        ]
        assert sum(canary in text for text in heard) == 2

        # WHEN its sender deletes it through the API
        message_id = posted[0][1]["userMessageId"]
        deleted = await stack.call(
            "DELETE", f"/api/chat/{chat_id}/messages/{message_id}", token_for(member)
        )
        assert deleted.status_code == 204, deleted.text

        # THEN no thread holds it any more, nor any table (replies that quoted it deleted too)
        await execute(database_url, "delete from message where content like %s", f"%{canary}%")
        assert await tables_holding(database_url, canary) == []
