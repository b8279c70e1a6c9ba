"""A turn's in-memory copy of its thread, which hands its graph the head as it was decoded.

A turn seeds an in-memory saver with the head its thread continues, decoded already: read from
the database, or recalled from the process's last run of the thread (infra/store/heads.py). The
library's saver encodes it on the way in and decodes it again when the graph's run begins, the
whole history twice more before the model is called. `TurnMemory` gives the first read of the
seeded checkpoint the values it was seeded with instead: the checkpoint's dictionaries and
lists copied (a run that appends to a list in place leaves the seeder's, which may be the
process's history cache, as it was), the items themselves (messages, which nothing changes)
shared with whoever seeded it. Any write ends that; every other read decodes, as the library's
does, so that the stored copy never shares a value with a live run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    copy_checkpoint,
    get_checkpoint_id,
)
from langgraph.checkpoint.memory import InMemorySaver


class TurnMemory(InMemorySaver):
    """An in-memory saver whose seeded checkpoint's first read is the one it was seeded with."""

    _seeded: CheckpointTuple | None = None

    def seeded(self, stored: RunnableConfig, found: CheckpointTuple) -> None:
        """`found` was just stored as `stored` (with its pending writes): its first read is it."""
        checkpoint = copy_checkpoint(found.checkpoint)
        values = checkpoint["channel_values"]
        checkpoint["channel_values"] = {
            channel: list(value) if isinstance(value, list) else value
            for channel, value in values.items()
        }
        self._seeded = CheckpointTuple(
            config=stored,
            checkpoint=checkpoint,
            metadata=found.metadata.copy(),
            parent_config=found.parent_config,
            pending_writes=list(found.pending_writes or []),
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        seeded, self._seeded = self._seeded, None
        if seeded is not None and _reads(config, seeded):
            return seeded
        return super().get_tuple(config)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._seeded = None
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._seeded = None
        super().put_writes(config, writes, task_id, task_path)


def _reads(config: RunnableConfig, seeded: CheckpointTuple) -> bool:
    """Whether `config` reads the seeded checkpoint: its thread's latest (nothing was written
    since it), or it by its id."""
    asked, held = config["configurable"], seeded.config["configurable"]
    return (
        asked["thread_id"] == held["thread_id"]
        and asked.get("checkpoint_ns", "") == held.get("checkpoint_ns", "")
        and get_checkpoint_id(config) in (None, held["checkpoint_id"])
    )
