"""Durable checkpoints: the Postgres saver on our pool, and copies between it and memory."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from agent.threads import ThreadId, thread_config
from infra.db import Conn, Pool

# The saver's own table, by its key: whether the thread has this checkpoint (at the root
# namespace, where the graph's checkpoints live).
CHECKPOINT_EXISTS_SQL = """
select 1 from langgraph.checkpoints
where thread_id = %s and checkpoint_ns = '' and checkpoint_id = %s
"""


def durable_saver(pool_or_conn: Pool | Conn) -> AsyncPostgresSaver:
    """The saver on our own pool (never prepares statements; see infra.db), or on a connection
    inside a transaction so its writes commit together with ours."""
    return AsyncPostgresSaver(pool_or_conn)


async def has_checkpoint(conn: Conn, thread_id: ThreadId, checkpoint_id: str) -> bool:
    """Whether `thread_id` has the checkpoint `checkpoint_id`; the connection must act as the
    service (users cannot read checkpoints)."""
    found = await conn.execute(CHECKPOINT_EXISTS_SQL, (thread_id, checkpoint_id))
    return await found.fetchone() is not None


async def load_latest_into_memory(
    durable: AsyncPostgresSaver,
    memory: InMemorySaver,
    thread_id: ThreadId,
    checkpoint_id: str | None = None,
) -> str | None:
    """Seed `memory` with the thread's latest durable checkpoint, or the one named; returns its
    id (None for a new thread)."""
    named = {"checkpoint_id": checkpoint_id} if checkpoint_id else {}
    found = await durable.aget_tuple(thread_config(thread_id, **named))
    if found is None:
        if checkpoint_id:
            raise LookupError(f"checkpoint {checkpoint_id} of {thread_id} not found")
        return None
    await _put_tuple(memory, found)
    return str(found.checkpoint["id"])


async def copy_new_checkpoints(
    memory: InMemorySaver, durable: AsyncPostgresSaver, thread_id: ThreadId, *, known: str | None
) -> str | None:
    """Copy every checkpoint and pending write of the thread that `memory` created after `known`
    (the seeded one), oldest first, so parents exist before children. Returns the newest id."""
    tuples = [t async for t in memory.alist(thread_config(thread_id))]
    newest: str | None = None
    for item in reversed(tuples):
        checkpoint_id = str(item.checkpoint["id"])
        newest = checkpoint_id
        if checkpoint_id == known:
            continue
        await _put_tuple(durable, item)
    return newest


async def _put_tuple(saver: InMemorySaver | AsyncPostgresSaver, item: CheckpointTuple) -> None:
    parent_id = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    config: RunnableConfig = {
        "configurable": {
            "thread_id": item.config["configurable"]["thread_id"],
            "checkpoint_ns": item.config["configurable"].get("checkpoint_ns", ""),
            **({"checkpoint_id": parent_id} if parent_id else {}),
        }
    }
    # All channel versions count as new: blob upserts of versions already stored are no-ops.
    stored = await saver.aput(
        config, item.checkpoint, item.metadata, dict(item.checkpoint["channel_versions"])
    )
    writes: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in item.pending_writes or []:
        writes[task_id].append((channel, value))
    for task_id, task_writes in writes.items():
        await saver.aput_writes(stored, task_writes, task_id)
