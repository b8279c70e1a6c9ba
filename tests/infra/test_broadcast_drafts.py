"""DRAFT_TRANSPORT=broadcast: drafts sent with realtime.send from the writer's transaction, and
the Realtime schema the migrations add only where Supabase's is absent."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg import sql

from infra.db import Pool
from infra.migrate import migrate
from infra.store import messages
from infra.store.draft_rows import delete_draft
from infra.store.drafts import DraftWriter, chat_topic
from infra.store.ids import ChatId, MessageId
from tests.databases import with_database
from tests.support import create_user_with_chat, execute, fetch, insert_message

BROADCASTS_SQL = """
select topic, event, private, payload from realtime.messages
where extension = 'broadcast' order by inserted_at, payload ->> 'seq'
"""


def writer(pool: Pool, chat_id: uuid.UUID, message_id: uuid.UUID, **options: Any) -> DraftWriter:
    return DraftWriter(
        pool,
        reply_id=MessageId(message_id),
        chat_id=ChatId(chat_id),
        transport="broadcast",
        interval=0,
        **options,
    )


async def broadcasts(database_url: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in row["payload"].items() if k != "id"} | {"_topic": row["topic"]}
        for row in await fetch(database_url, BROADCASTS_SQL)
    ]


async def test_each_write_broadcasts_what_it_added_on_the_chats_private_channel(
    database_url: str, pool: Pool
) -> None:
    _, chat_id = await create_user_with_chat(database_url)
    message_id = await insert_message(database_url, chat_id, "")
    # WHEN a reply streams three writes' worth of text
    draft = writer(pool, chat_id, message_id, text="Before\n\n")
    await draft.start()
    for text in ("Hel", "lo", " world"):
        await draft.append(text)
    await draft.flush()
    # THEN the first write sends the whole draft, each later one what it added to the one before
    rows = await fetch(database_url, BROADCASTS_SQL)
    assert {(r["topic"], r["event"], r["private"]) for r in rows} == {
        (chat_topic(chat_id), "draft", True)
    }
    assert all(uuid.UUID(r["payload"]["id"]) for r in rows)  # realtime.send adds one
    topic = chat_topic(chat_id)
    assert await broadcasts(database_url) == [
        {"messageId": str(message_id), "seq": 1, "after": None, "text": "Before\n\nHel",
         "_topic": topic},
        {"messageId": str(message_id), "seq": 2, "after": 1, "text": "lo", "_topic": topic},
        {"messageId": str(message_id), "seq": 3, "after": 2, "text": " world", "_topic": topic},
    ]  # fmt: skip
    # AND the whole draft is kept, unlogged, for the history and a cancel; message_draft is not
    # written (no Postgres Changes for it)
    [kept] = await fetch(database_url, "select * from public.broadcast_draft")
    assert (kept["draft_content"], kept["seq"]) == ("Before\n\nHello world", 3)
    assert await fetch(database_url, "select * from public.message_draft") == []
    [table] = await fetch(
        database_url,
        "select relpersistence from pg_class where oid = 'public.broadcast_draft'::regclass",
    )
    assert table["relpersistence"] == "u"


async def test_a_stale_writer_sends_nothing_and_a_retry_sends_its_whole_draft(
    database_url: str, pool: Pool
) -> None:
    _, chat_id = await create_user_with_chat(database_url)
    message_id = await insert_message(database_url, chat_id, "")
    first = writer(pool, chat_id, message_id)
    await first.append("one two three")
    await first.flush()
    # GIVEN a writer that restarts its numbering (an older attempt): its write is refused, and
    # nothing is broadcast
    stale = writer(pool, chat_id, message_id, text="old")
    await stale.flush()
    # AND a round run again, continuing after the stored seq with text of its own
    retry = writer(pool, chat_id, message_id)
    await retry.start()
    await retry.append("one two")  # shorter than what is shown: refused
    await retry.append(" four five")
    await retry.flush()
    sent = await broadcasts(database_url)
    assert [(b["seq"], b["after"], b["text"]) for b in sent] == [
        (1, None, "one two three"),
        # (not a continuation of what is shown: the whole draft, which replaces it)
        (3, None, "one two four five"),
    ]


async def test_a_reply_that_ended_broadcasts_no_draft(database_url: str, pool: Pool) -> None:
    _, chat_id = await create_user_with_chat(database_url)
    message_id = await insert_message(database_url, chat_id, "")
    await execute(database_url, "update message set status = 'canceled' where id = %s", message_id)
    late = writer(pool, chat_id, message_id)
    await late.append("late text")
    await late.flush()
    assert await fetch(database_url, BROADCASTS_SQL) == []
    assert await fetch(database_url, "select * from public.broadcast_draft") == []


async def test_a_rolled_back_write_broadcasts_nothing(database_url: str, pool: Pool) -> None:
    # Realtime sends what realtime.messages got once its transaction commits: a draft written in
    # a transaction that rolls back is never seen.
    _, chat_id = await create_user_with_chat(database_url)
    async with (
        await psycopg.AsyncConnection.connect(database_url) as conn,
        conn.transaction(force_rollback=True),
    ):
        await conn.execute(
            "select realtime.send('{\"text\": \"x\"}'::jsonb, 'draft', %s, true)",
            (chat_topic(chat_id),),
        )
    assert await fetch(database_url, BROADCASTS_SQL) == []


async def test_history_and_cancel_see_a_broadcast_draft(database_url: str, pool: Pool) -> None:
    _, chat_id = await create_user_with_chat(database_url)
    message_id = await insert_message(database_url, chat_id, "")
    draft = writer(pool, chat_id, message_id)
    await draft.append("shown so far")
    await draft.flush()
    async with pool.connection() as conn:
        await messages.cancel(conn, MessageId(message_id))
        await delete_draft(conn, MessageId(message_id))
    query = "select content, status from message where id = %s"
    [row] = await fetch(database_url, query, message_id)
    assert row == {"content": "shown so far", "status": "canceled"}
    assert await fetch(database_url, "select * from public.broadcast_draft") == []


SUPABASE_LIKE_SQL = """
create schema realtime;
create table realtime.messages (
  topic text not null, extension text not null, payload jsonb, event text, private boolean,
  updated_at timestamp not null default now(), inserted_at timestamp not null default now(),
  id uuid not null default gen_random_uuid(), binary_payload bytea,
  primary key (id, inserted_at)
) partition by range (inserted_at);
alter table realtime.messages enable row level security;
create function realtime.topic() returns text language sql stable as $$ select 'theirs' $$;
create function realtime.send(payload jsonb, event text, topic text, private boolean default true)
returns void language sql as $$ select $$;
"""


async def test_the_migrations_leave_supabases_realtime_schema_alone(server_url: str) -> None:
    # GIVEN a database where Realtime's schema exists, as on a Supabase project
    name = f"handoff_t_{uuid.uuid4().hex[:12]}"
    create = sql.SQL("create database {}").format(sql.Identifier(name))
    drop = sql.SQL("drop database {} with (force)").format(sql.Identifier(name))
    await execute(server_url, create.as_string())
    try:
        url = with_database(server_url, name)
        await execute(url, SUPABASE_LIKE_SQL)
        # WHEN the migrations run
        await migrate(url)
        # THEN Realtime's functions and table are as they were (still partitioned), no
        # publication is made for it (Realtime makes its own), and the policy is added
        functions = await fetch(
            url,
            "select p.proname, p.prosrc from pg_proc p"
            " join pg_namespace n on n.oid = p.pronamespace"
            " where n.nspname = 'realtime' order by 1",
        )
        assert [(f["proname"], f["prosrc"].strip()) for f in functions] == [
            ("send", "select"),
            ("topic", "select 'theirs'"),
        ]
        [table] = await fetch(
            url, "select relkind from pg_class where oid = 'realtime.messages'::regclass"
        )
        assert table["relkind"] == "p"
        publications = "select * from pg_publication where pubname like '%%messages%%'"
        assert await fetch(url, publications) == []
        [policy] = await fetch(
            url, "select policyname from pg_policies where schemaname = 'realtime'"
        )
        assert policy["policyname"] == "chat members receive its broadcasts"
        # AND running them again changes nothing
        assert await migrate(url) == []
    finally:
        await execute(server_url, drop.as_string())
