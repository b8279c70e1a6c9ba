"""Retention deletes the checkpoints between those something can still need, keeps every list
the kept ones are rebuilt from, and a second prune finds nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from agent.threads import ThreadId, thread_config, thread_key
from infra.db import Pool
from infra.store.checkpoints import durable_saver
from infra.store.retention import Pruned, prune
from tests.support import create_user_with_chat, execute, fetch, insert_message

AGE_SQL = """
update langgraph.checkpoints
set checkpoint = jsonb_set(checkpoint, '{ts}', to_jsonb((now() - interval '40 days')::text))
where thread_id = %s and not checkpoint_id = any(%s)
"""
ROWS_SQL = """
select checkpoint_id, parent_checkpoint_id from langgraph.checkpoints
where thread_id = %s order by checkpoint_id
"""


def checkpoint(n: int, messages: list[BaseMessage]) -> Checkpoint:
    made = empty_checkpoint()
    made["id"] = str(uuid6(clock_seq=n))
    made["channel_values"] = {"messages": messages, "round": {"n": n}}
    made["channel_versions"] = {"messages": f"{n:032}.0", "round": f"{n:032}.0"}
    return made


async def chain(pool: Pool, thread: ThreadId, length: int) -> list[str]:
    """`length` checkpoints, each the child of the one before with one message more, its
    messages a delta on its parent's; their ids."""
    made: list[Checkpoint] = []
    messages: list[BaseMessage] = []
    async with pool.connection() as conn:
        saver = durable_saver(conn)
        for n in range(1, length + 1):
            kind = HumanMessage if n % 2 else AIMessage
            messages = [*messages, kind(f"m{n}", id=f"m{n}")]
            parent = {"checkpoint_id": made[-1]["id"]} if made else {}
            made.append(checkpoint(n, messages))
            base = made[-2] if len(made) > 1 else None
            await saver.aput_after(base, thread_config(thread, **parent), made[-1], {})
    return [c["id"] for c in made]


async def messages_at(pool: Pool, thread: ThreadId, checkpoint_id: str) -> list[str]:
    async with pool.connection() as conn:
        found = await durable_saver(conn).aget_tuple(
            thread_config(thread, checkpoint_id=checkpoint_id)
        )
    assert found is not None
    return [str(m.content) for m in found.checkpoint["channel_values"]["messages"]]


async def test_prune_keeps_heads_named_checkpoints_and_their_chains(
    database_url: str, pool: Pool
) -> None:
    # GIVEN a thread of six checkpoints: the first named by a message, the fourth a branch
    # head, the sixth the latest, every one but the fifth older than the cutoff
    _, chat_id = await create_user_with_chat(database_url)
    thread = thread_key(chat_id, "default")
    ids = await chain(pool, thread, 6)
    await insert_message(database_url, chat_id, checkpointId=ids[0])
    await execute(
        database_url,
        "insert into public.branch (chat_id, assistant_id, id, head_checkpoint_id)"
        " values (%s, 'default', 'main', %s)",
        chat_id,
        ids[3],
    )
    await execute(database_url, AGE_SQL, thread, [ids[4]])
    before = datetime.now(UTC) - timedelta(days=30)

    # WHEN a dry run counts, THEN it deletes nothing
    async with pool.connection() as conn:
        counted = await prune(conn, before, dry_run=True)
    assert counted == Pruned(checkpoints=2, blobs=2, writes=0, tool_results=0)
    assert len(await fetch(database_url, ROWS_SQL, thread)) == 6

    # WHEN it prunes
    async with pool.connection() as conn:
        pruned = await prune(conn, before)

    # THEN the second and third went, with their `round` blobs (not their messages, which the
    # later checkpoints are deltas on), and the kept ones name their nearest kept ancestor
    assert pruned == counted
    rows = await fetch(database_url, ROWS_SQL, thread)
    assert [(r["checkpoint_id"], r["parent_checkpoint_id"]) for r in rows] == [
        (ids[0], None),
        (ids[3], ids[0]),
        (ids[4], ids[3]),
        (ids[5], ids[4]),
    ]
    for n in (0, 3, 4, 5):
        assert await messages_at(pool, thread, ids[n]) == [f"m{i}" for i in range(1, n + 2)]

    # AND a second prune finds nothing
    async with pool.connection() as conn:
        assert await prune(conn, before) == Pruned()
