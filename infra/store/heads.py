"""The head a turn continues, read with its checkpoint in one round trip.

A new message continues the active branch of its chat's thread (infra/store/branches.py) from
that branch's head checkpoint, or from the thread's latest when the branch records none. Read
one after the other, the branch and the checkpoint are two round trips before the turn's first
token; here one statement (`handoff.active_checkpoint`, a plpgsql function whose plans the
session keeps) reads the branch and, in the same snapshot, the checkpoint it names, with its
blobs and pending writes as the saver's own query reads them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

from agent.threads import ThreadId, thread_config
from infra.store.branches import MAIN_BRANCH
from infra.store.checkpoints import CompactSaver, seed_memory
from infra.store.ids import ChatId

# The active branch, its head as recorded, and the saver's columns for the checkpoint it
# continues (null when the thread has none yet): migration 0026.
ACTIVE_CHECKPOINT_SQL = """
select * from handoff.active_checkpoint(%(chat_id)s, %(assistant_id)s, %(thread_id)s)
"""


@dataclass(frozen=True)
class Head:
    """The head a turn continues: its branch, its checkpoint (None: a new thread), and that
    checkpoint's messages and metadata as loaded. The messages are the history cache's own
    (infra/store/history_cache.py): read them, never change them. None when the checkpoint has
    pending writes, which the thread's state applies to what it stored."""

    branch: str
    checkpoint_id: str | None = None
    messages: Sequence[Any] | None = ()
    metadata: Mapping[str, Any] | None = None


async def load_active_into_memory(
    durable: CompactSaver,
    memory: InMemorySaver,
    chat_id: ChatId,
    assistant_id: str,
    thread_id: ThreadId,
) -> Head:
    """Seed `memory` with the head of the active branch of `assistant_id`'s thread in
    `chat_id`, and return it."""
    params = {"chat_id": chat_id, "assistant_id": assistant_id, "thread_id": thread_id}
    async with durable._cursor() as cur:
        await cur.execute(ACTIVE_CHECKPOINT_SQL, params, binary=True)
        row: dict[str, Any] | None = await cur.fetchone()
    return await seed_active(durable, memory, row, thread_id)


async def seed_active(
    durable: CompactSaver, memory: InMemorySaver, row: dict[str, Any] | None, thread_id: ThreadId
) -> Head:
    """Seed `memory` with the head `row` holds, in `handoff.active_checkpoint`'s columns as
    read in binary (here, or by `handoff.open_turn`), and return it."""
    branch, head = (str(row["branch"]), row["head"]) if row else (MAIN_BRANCH, None)
    if row is None or row["checkpoint_id"] is None:
        if head is not None:
            raise LookupError(f"checkpoint {head} of {thread_id} not found")
        await durable.rebuilt(None, thread_id)
        return Head(branch)
    if row["checkpoint"]["v"] < 4 and row["parent_checkpoint_id"]:
        # Written before LangGraph's checkpoint format 4: the saver's own read migrates it.
        named = thread_config(thread_id, checkpoint_id=row["checkpoint_id"])
        found = await durable.aget_tuple(named)
    else:
        found = await durable.rebuilt(await durable._load_checkpoint_tuple(row), thread_id)
    if found is None:
        raise LookupError(f"checkpoint {row['checkpoint_id']} of {thread_id} not found")
    messages = (
        None if found.pending_writes else found.checkpoint["channel_values"].get("messages", ())
    )
    return Head(branch, await seed_memory(memory, found), messages, found.metadata)


# How many threads' heads a process recalls, for how long, and up to what length.
RECALLED_THREADS = 128
RECALLED_FOR_S = 120.0
RECALLED_MESSAGES = 200


class RecentHeads:
    """The head each thread's last run in this process stored, as that run held it: what the
    thread's next turn most likely continues, to run ahead on (turns/ahead.py). Only a guess:
    the database's head, read as the turn starts, says whether it still is. Each is taken by
    the thread's next turn; the least recently stored go first, and each after
    `RECALLED_FOR_S`, so a deleted chat's last head stays in memory that long at most."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heads: OrderedDict[str, tuple[float, str, CheckpointTuple]] = OrderedDict()

    def remember(self, branch: str, head: CheckpointTuple) -> None:
        """`head`, just stored on `branch` of its thread, unless it has pending writes (only
        the thread's state applies them) or too long a history to hold."""
        thread_id = str(head.config["configurable"]["thread_id"])
        messages = head.checkpoint["channel_values"].get("messages", ())
        self._heads.pop(thread_id, None)
        if head.pending_writes or len(messages) > RECALLED_MESSAGES:
            return
        self._heads[thread_id] = (self._clock(), branch, head)
        while len(self._heads) > RECALLED_THREADS:
            self._heads.popitem(last=False)

    def take(self, thread_id: str) -> tuple[str, CheckpointTuple] | None:
        """The branch and head last stored for the thread, if recent, no longer held: the
        turn that takes it stores the thread's next head, or fails."""
        now = self._clock()
        while self._heads and next(iter(self._heads.values()))[0] < now - RECALLED_FOR_S:
            self._heads.popitem(last=False)
        found = self._heads.pop(thread_id, None)
        return None if found is None else found[1:]

    def held(self, thread_id: str) -> CheckpointTuple | None:
        """The head held for the thread, left held."""
        found = self._heads.get(thread_id)
        return None if found is None else found[2]


RECENT_HEADS = RecentHeads()
