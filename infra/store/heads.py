"""The head a turn continues, read with its checkpoint in one round trip.

A new message continues the active branch of its chat's thread (infra/store/branches.py) from
that branch's head checkpoint, or from the thread's latest when the branch records none. Read
one after the other, the branch and the checkpoint are two round trips before the turn's first
token; here one query reads the branch and, in the same snapshot, the checkpoint it names, with
its blobs and pending writes as the saver's own query reads them.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.base import SELECT_SQL

from agent.threads import ThreadId, thread_config
from infra.store.branches import ACTIVE_SQL, MAIN_BRANCH
from infra.store.checkpoints import CompactSaver, seed_memory
from infra.store.ids import ChatId

# The saver's columns (null when the thread has no checkpoint yet) beside the active branch.
ACTIVE_CHECKPOINT_SQL = f"""
select a.branch, a.head, c.* from ({ACTIVE_SQL}) a
left join lateral ({SELECT_SQL}
  where thread_id = %(thread_id)s and checkpoint_ns = ''
    and checkpoint_id = coalesce(a.head, (
      select max(checkpoint_id) from checkpoints
      where thread_id = %(thread_id)s and checkpoint_ns = ''))
) c on true
"""  # noqa: S608 (constants only)


async def load_active_into_memory(
    durable: CompactSaver,
    memory: InMemorySaver,
    *,
    chat_id: ChatId,
    assistant_id: str,
    thread_id: ThreadId,
) -> tuple[str, str | None]:
    """Seed `memory` with the head of the active branch of `assistant_id`'s thread in
    `chat_id`; returns that branch and the head's id (None for a new thread)."""
    params = {"chat_id": chat_id, "assistant_id": assistant_id, "thread_id": thread_id}
    async with durable._cursor() as cur:
        await cur.execute(ACTIVE_CHECKPOINT_SQL, params, binary=True)
        row: dict[str, Any] | None = await cur.fetchone()
    branch, head = (str(row["branch"]), row["head"]) if row else (MAIN_BRANCH, None)
    if row is None or row["checkpoint_id"] is None:
        if head is not None:
            raise LookupError(f"checkpoint {head} of {thread_id} not found")
        await durable.rebuilt(None, thread_id)
        return branch, None
    if row["checkpoint"]["v"] < 4 and row["parent_checkpoint_id"]:
        # Written before LangGraph's checkpoint format 4: the saver's own read migrates it.
        named = thread_config(thread_id, checkpoint_id=row["checkpoint_id"])
        found = await durable.aget_tuple(named)
    else:
        found = await durable.rebuilt(await durable._load_checkpoint_tuple(row), thread_id)
    if found is None:
        raise LookupError(f"checkpoint {row['checkpoint_id']} of {thread_id} not found")
    return branch, await seed_memory(memory, found)
