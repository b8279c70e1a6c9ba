"""Migrations, the draft writer and checkpoint copies (RLS: tests/security/test_rls.py)."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import build_agent_graph
from agent.model import create_model
from agent.threads import thread_config, thread_key
from demo.tools import demo_tools
from infra.db import Pool
from infra.migrate import applied_text, migrate
from infra.store.checkpoints import copy_new_checkpoints, durable_saver, load_latest_into_memory
from infra.store.drafts import DraftWriter
from infra.store.ids import ChatId, MessageId
from infra.store.turn_memory import TurnMemory
from tests.support import create_user_with_chat, execute, fetch


async def test_migrations_are_idempotent(database_url: str) -> None:
    assert await migrate(database_url) == []
    tables = await fetch(
        database_url,
        "select table_schema, table_name from information_schema.tables "
        "where table_schema in ('public', 'langgraph') order by 1, 2",
    )
    assert {(t["table_schema"], t["table_name"]) for t in tables} >= {
        ("public", "chat"),
        ("public", "message"),
        ("public", "message_draft"),
        ("public", "job_runs"),
        ("langgraph", "checkpoints"),
        ("langgraph", "checkpoint_writes"),
    }
    published = await fetch(
        database_url,
        "select tablename from pg_publication_tables where pubname = 'supabase_realtime'",
    )
    assert {p["tablename"] for p in published} == {"message", "message_draft"}


async def test_what_was_applied_is_said_by_whose_migrations_they_are(database_url: str) -> None:
    # `handoff dev` prints this: infra/migrations' files and LangGraph's checkpoint migrations
    # are counted apart, so the figure matches neither folder alone by surprise
    both = ["0001_supabase_shim.sql", "0002_chat.sql", "langgraph:0"]
    assert applied_text(both) == "2 of Handoff's and 1 of the LangGraph checkpointer's applied"
    assert applied_text(["0025_next.sql"]) == "1 of Handoff's applied"
    assert applied_text(["langgraph:10"]) == "1 of the LangGraph checkpointer's applied"
    # and a database already up to date (the test's, cloned from a migrated template)
    assert applied_text(await migrate(database_url)) == "none to apply"


async def seed_chat_rows(database_url: str) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    user_id, chat_id = await create_user_with_chat(database_url)
    message_id = uuid.uuid4()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "insert into message (id, chat_id, role, content, status)"
            " values (%s, %s, 'assistant', 'x', 'streaming')",
            (message_id, chat_id),
        )
        await conn.execute(
            "insert into message_draft (message_id, chat_id, draft_content, seq)"
            " values (%s, %s, 'd', 1)",
            (message_id, chat_id),
        )
        await conn.execute(
            "insert into job_runs (chat_id, root_message_id, event_name, idempotency_key, payload)"
            " values (%s, %s, 'chat/tool_handoff', %s, '{}')",
            (chat_id, message_id, str(uuid.uuid4())),
        )
    return user_id, chat_id, message_id


# The functions every turn runs, which plan their statements once a session (migration 0028). A
# `create or replace` drops a function's settings, and this with them.
PLANS_KEPT = (
    "open_turn",
    "start_turn",
    "admit",
    "take_slot",
    "chat_route",
    "active_checkpoint",
    "promote_waiting_turn",
    "record_usage",
    "record_sources",
)
SETTINGS_SQL = """
select p.proname, p.proconfig from pg_proc p join pg_namespace n on n.oid = p.pronamespace
where n.nspname = 'handoff' and p.proname = any(%s)
"""


async def test_the_functions_of_every_turn_keep_their_plans(database_url: str) -> None:
    rows = await fetch(database_url, SETTINGS_SQL, list(PLANS_KEPT))
    kept = {
        r["proname"]: "plan_cache_mode=force_generic_plan" in (r["proconfig"] or []) for r in rows
    }
    assert kept == dict.fromkeys(PLANS_KEPT, True)


async def test_draft_writer_throttles_and_never_goes_back(database_url: str, pool: Pool) -> None:
    _, chat_id, message_id = await seed_chat_rows(database_url)
    now = [100.0]
    writer = DraftWriter(
        pool,
        reply_id=MessageId(message_id),
        chat_id=ChatId(chat_id),
        text="Intro\n\n",
        interval=0.25,
        max_bytes=64,
        clock=lambda: now[0],
    )
    # (the seeded draft, seq 1, was written long enough ago for the next write to be due)
    await execute(database_url, "update message_draft set updated_at = now() - interval '1 minute'")
    await writer.start()  # continues after the seeded seq 1
    await writer.append("a")  # first write is immediate
    for _ in range(10):
        now[0] += 0.01
        await writer.append("b")  # inside the interval: coalesced
    assert writer.writes == 1
    await writer.append("c" * 64)  # a burst over max_bytes writes at once
    assert writer.writes == 2
    await writer.append("d")
    await writer.flush()
    assert writer.writes == 3
    [row] = await fetch(
        database_url, "select * from message_draft where message_id = %s", message_id
    )
    assert row["draft_content"] == "Intro\n\na" + "b" * 10 + "c" * 64 + "d"
    assert row["seq"] == 4
    # A writer from an older attempt that restarts its numbering cannot overwrite it.
    stale = DraftWriter(pool, reply_id=MessageId(message_id), chat_id=ChatId(chat_id), text="old")
    await stale.flush()
    [row] = await fetch(
        database_url, "select * from message_draft where message_id = %s", message_id
    )
    assert row["draft_content"].endswith("d")


async def test_a_writer_continuing_a_draft_waits_out_the_interval_of_its_last_write(
    database_url: str, pool: Pool
) -> None:
    # GIVEN a draft written just now (by the quick path, or a round's earlier attempt)
    _, chat_id, message_id = await seed_chat_rows(database_url)
    writer = DraftWriter(pool, reply_id=MessageId(message_id), chat_id=ChatId(chat_id))
    await writer.start()
    # WHEN another writer continues it at once, THEN its first text waits for the interval
    await writer.append("more")
    assert writer.writes == 0
    await writer.flush()
    assert writer.writes == 1


async def test_a_message_that_ended_gets_no_new_draft(database_url: str, pool: Pool) -> None:
    # GIVEN a streaming message that the user canceled (its draft gone, as the cancel leaves it)
    _, chat_id, message_id = await seed_chat_rows(database_url)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("update message set status = 'canceled' where id = %s", (message_id,))
        await conn.execute("delete from message_draft where message_id = %s", (message_id,))
    # WHEN a round that was still streaming writes and flushes its draft
    writer = DraftWriter(pool, reply_id=MessageId(message_id), chat_id=ChatId(chat_id))
    await writer.append("late text")
    await writer.flush()
    # THEN no draft comes back for subscribers to show
    assert await fetch(database_url, "select * from message_draft") == []


async def test_checkpoints_copy_from_memory_and_back(pool: Pool) -> None:
    thread_id = thread_key(uuid.uuid4(), "default")
    config = thread_config(thread_id)
    model = create_model("scripted", token_delay_ms=0)
    # GIVEN a run in memory that paused before tools
    memory = InMemorySaver()
    graph = build_agent_graph(model, demo_tools(), memory)
    await graph.ainvoke({"messages": [HumanMessage("/calc 1+1")]}, config)
    # WHEN it is stored in Postgres
    stored = await copy_new_checkpoints(memory, durable_saver(pool), thread_id, known=None)
    assert stored is not None
    newest = stored.checkpoint["id"]
    # THEN the durable graph resumes from exactly that state
    durable = build_agent_graph(model, demo_tools(), durable_saver(pool))
    state = await durable.aget_state(config)
    assert state.config["configurable"]["checkpoint_id"] == newest
    assert state.next == ("tools",)
    # AND its newest checkpoint alone is stored, not each superstep before it
    assert [c.checkpoint["id"] async for c in durable_saver(pool).alist(config)] == [newest]
    # AND a fresh memory saver seeded from Postgres continues the thread
    fresh = InMemorySaver()
    assert await load_latest_into_memory(durable_saver(pool), fresh, thread_id) == newest
    resumed = build_agent_graph(model, demo_tools(), fresh, interrupt_before_tools=False)
    result = await resumed.ainvoke(None, config)
    assert "2" in result["messages"][-1].content


@pytest.mark.parametrize("memory_kind", [TurnMemory, InMemorySaver])
async def test_a_continued_thread_stores_what_its_run_added(
    database_url: str, pool: Pool, memory_kind: type[InMemorySaver]
) -> None:
    thread_id = thread_key(uuid.uuid4(), "default")
    config = thread_config(thread_id)
    model = create_model("scripted", token_delay_ms=0)
    # GIVEN a stored first turn
    first = InMemorySaver()
    graph = build_agent_graph(model, demo_tools(), first)
    await graph.ainvoke({"messages": [HumanMessage("hello")]}, config)
    stored = await copy_new_checkpoints(first, durable_saver(pool), thread_id, known=None)
    assert stored is not None
    # WHEN the next turn runs on a memory seeded with it, and is stored
    memory = memory_kind()
    known = await load_latest_into_memory(durable_saver(pool), memory, thread_id)
    graph = build_agent_graph(model, demo_tools(), memory)
    await graph.ainvoke({"messages": [HumanMessage("again")]}, config)
    newest = await copy_new_checkpoints(memory, durable_saver(pool), thread_id, known=known)
    assert newest is not None
    # THEN its messages are stored as the two it added to the two it was seeded with
    version = newest.checkpoint["channel_versions"]["messages"]
    [row] = await fetch(
        database_url,
        "select type from langgraph.checkpoint_blobs"
        " where thread_id = %s and channel = 'messages' and version = %s",
        thread_id,
        str(version),
    )
    seeded = stored.checkpoint["channel_versions"]["messages"]
    assert row["type"] == f"delta:2:{seeded}"
    # AND the thread loads whole
    loaded = await durable_saver(pool).aget_tuple(config)
    assert loaded is not None
    said = [m.content for m in loaded.checkpoint["channel_values"]["messages"]]
    assert said[0::2] == ["hello", "again"]
