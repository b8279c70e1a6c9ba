"""A new message's turn continues the active branch from its head: one statement reads the
branch and the head's checkpoint, which loads as the saver's own read loads it."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from agent.threads import ThreadId, thread_config, thread_key
from infra.db import Pool
from infra.store.checkpoints import durable_saver, load_latest_into_memory
from infra.store.heads import Head, load_active_into_memory
from infra.store.ids import ChatId
from tests.infra.test_retention import chain
from tests.support import create_user_with_chat, execute

BRANCH_SQL = """
insert into public.branch (chat_id, assistant_id, id, head_checkpoint_id) values (%s, %s, %s, %s)
"""
ACTIVE_SQL = (
    "insert into public.active_branch (chat_id, assistant_id, branch_id) values (%s, %s, %s)"
)


async def seeded(memory: InMemorySaver, thread: ThreadId) -> Any:
    found = await memory.aget_tuple(thread_config(thread))
    if found is None:
        return None
    return found.checkpoint, found.metadata, found.parent_config, found.pending_writes


async def test_the_active_head_loads_as_the_thread_read_at_that_checkpoint(
    database_url: str, pool: Pool
) -> None:
    _, chat = await create_user_with_chat(database_url)
    chat_id, thread = ChatId(chat), thread_key(chat, "default")

    async def head() -> tuple[Head, Any]:
        memory = InMemorySaver()
        loaded = await load_active_into_memory(
            durable_saver(pool), memory, chat_id, "default", thread
        )
        return loaded, await seeded(memory, thread)

    # GIVEN a thread without checkpoints: the main branch, nothing seeded
    assert await head() == (Head("main"), None)
    # GIVEN three checkpoints and no branch recorded
    ids = await chain(pool, thread, 3)
    latest, values = await head()
    # THEN the latest is seeded, as the saver's read of the thread seeds it
    same = InMemorySaver()
    assert await load_latest_into_memory(durable_saver(pool), same, thread) == ids[2]
    assert (latest.branch, latest.checkpoint_id) == ("main", ids[2])
    assert values == await seeded(same, thread)
    # AND the head carries the messages and metadata it was seeded with
    assert latest.messages is not None
    assert [m.content for m in latest.messages] == ["m1", "m2", "m3"]
    assert latest.metadata == values[1]
    # WHEN a fork's branch, whose head is the second, is the active one
    await execute(database_url, BRANCH_SQL, chat, "default", "fork", ids[1])
    await execute(database_url, ACTIVE_SQL, chat, "default", "fork")
    forked, values = await head()
    # THEN the turn continues it from that head
    same = InMemorySaver()
    await load_latest_into_memory(durable_saver(pool), same, thread, ids[1])
    assert (forked.branch, forked.checkpoint_id) == ("fork", ids[1])
    assert values == await seeded(same, thread)
    assert forked.messages is not None
    assert [m.content for m in forked.messages] == ["m1", "m2"]
    # WHEN that head has pending writes, which the thread's state applies to what it stored
    at = thread_config(thread, checkpoint_id=ids[1])
    await durable_saver(pool).aput_writes(at, [("messages", [AIMessage("w", id="w")])], "task")
    written, values = await head()
    # THEN its messages are left for the state to read, and the seeded copy has the writes
    assert (written.checkpoint_id, written.messages) == (ids[1], None)
    memory = InMemorySaver()
    await load_latest_into_memory(durable_saver(pool), memory, thread, ids[1])
    assert values == await seeded(memory, thread)
    assert [w[1] for w in values[3]] == ["messages"]


async def test_a_checkpoint_without_writes_loads_as_the_library_loads_it(pool: Pool) -> None:
    # GIVEN a thread's first checkpoint, stored whole, with no pending writes
    thread = thread_key(uuid.uuid4(), "default")
    [first] = await chain(pool, thread, 1)
    config = thread_config(thread, checkpoint_id=first)
    # WHEN our saver and the library's read it
    ours = await durable_saver(pool).aget_tuple(config)
    library = await AsyncPostgresSaver(pool).aget_tuple(config)
    # THEN they read the same tuple
    assert ours is not None
    assert library is not None
    assert ours == library
    assert ours.pending_writes == []
