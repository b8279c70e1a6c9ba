"""A turn's in-memory copy of its thread, which hands its graph the head as it was decoded.

A turn seeds an in-memory saver with the head its thread continues, decoded already: read from
the database, or recalled from the process's last run of the thread (infra/store/heads.py). The
library's saver encodes it on the way in and decodes it again when the graph's run begins, the
whole history twice more before the model is called. `TurnMemory` gives the first read of the
seeded checkpoint the values it was seeded with instead: the checkpoint's dictionaries and
lists copied (a run that appends to a list in place leaves the seeder's, which may be the
process's history cache, as it was), the items themselves (messages, which nothing changes)
shared with whoever seeded it. Any write ends that; every other read decodes, as the library's
does, so that the stored copy never shares a value with a live run. Nor does it encode the
seeded checkpoint on the way in: that waits for the first call that needs it stored (a write,
another read, a listing), which a turn makes only once its model has answered. Even then each
of its channel values is encoded only once a read needs that version: a run writes a history
of its own, and the seeded one is then most often never read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    copy_checkpoint,
    get_checkpoint_id,
)
from langgraph.checkpoint.memory import InMemorySaver

# A channel the seeded checkpoint has a version of but no value for.
_EMPTY = object()


class TurnMemory(InMemorySaver):
    """An in-memory saver whose seeded checkpoint's first read is the one it was seeded with,
    and which stores (encodes) that checkpoint only once anything else needs it."""

    _seeded: CheckpointTuple | None = None
    # The seeded checkpoint, as the child of this parent: not stored yet.
    _unstored: tuple[RunnableConfig, CheckpointTuple] | None = None
    # The seeded checkpoint as it was handed over, for `seeded`.
    _found: Checkpoint | None = None

    def __init__(self, **saver: Any) -> None:
        super().__init__(**saver)
        # The stored seed's channel values by their blob's key, until a read needs them encoded.
        self._deferred: dict[tuple[str, str, str, Any], Any] = {}

    def seed(self, parent: RunnableConfig, found: CheckpointTuple) -> None:
        """Hold `found`, with its pending writes, as the child of `parent`. Its first read is
        it; any other call stores it first, as `put` and `put_writes` would have."""
        self._unstored = (parent, found)
        self._found = found.checkpoint
        stored: RunnableConfig = {
            "configurable": {
                "thread_id": parent["configurable"]["thread_id"],
                "checkpoint_ns": parent["configurable"].get("checkpoint_ns", ""),
                "checkpoint_id": found.checkpoint["id"],
            }
        }
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

    def _store_seed(self) -> None:
        if self._unstored is None:
            return
        parent, found = self._unstored
        self._unstored = None
        stored = super().put(parent, found.checkpoint, found.metadata, {})
        where = (stored["configurable"]["thread_id"], stored["configurable"]["checkpoint_ns"])
        values = found.checkpoint["channel_values"]
        for channel, version in found.checkpoint["channel_versions"].items():
            self._deferred[(*where, channel, version)] = values.get(channel, _EMPTY)
        for task_id, writes in writes_by_task(found.pending_writes).items():
            super().put_writes(stored, writes, task_id)

    def _encode_deferred(self, keys: Iterable[tuple[str, str, str, Any]]) -> None:
        for key in keys:
            if key in self._deferred:
                value = self._deferred.pop(key)
                empty = value is _EMPTY
                self.blobs[key] = ("empty", b"") if empty else self.serde.dumps_typed(value)

    def _load_blobs(
        self, thread_id: str, checkpoint_ns: str, versions: ChannelVersions
    ) -> dict[str, Any]:
        self._encode_deferred((thread_id, checkpoint_ns, k, v) for k, v in versions.items())
        return super()._load_blobs(thread_id, checkpoint_ns, versions)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        seeded, self._seeded = self._seeded, None
        if seeded is not None and _reads(config, seeded):
            return seeded
        self._store_seed()
        return super().get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        self._store_seed()
        return super().list(config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._seeded = None
        self._store_seed()
        # What it writes replaces what was stored under the same keys, as it would have.
        where = (config["configurable"]["thread_id"], config["configurable"]["checkpoint_ns"])
        for channel, version in new_versions.items():
            self._deferred.pop((*where, channel, version), None)
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._seeded = None
        self._store_seed()
        super().put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._seeded = None
        self._store_seed()
        self._deferred = {k: v for k, v in self._deferred.items() if k[0] != thread_id}
        super().delete_thread(thread_id)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        self._store_seed()
        self._encode_deferred(list(self._deferred))  # the library reads its blobs directly here
        return super().get_delta_channel_history(config=config, channels=channels)


async def seeded(memory: InMemorySaver, config: RunnableConfig) -> Checkpoint | None:
    """The checkpoint `config` names, which `memory` was seeded with: as it was handed over when
    `memory` is a TurnMemory (its values shared: not to be changed), else read, decoding it."""
    held = memory._found if isinstance(memory, TurnMemory) else None
    if held is not None and str(held["id"]) == get_checkpoint_id(config):
        return held
    found = await memory.aget_tuple(config)
    return None if found is None else found.checkpoint


def writes_by_task(
    pending: Sequence[tuple[str, str, Any]] | None,
) -> dict[str, list[tuple[str, Any]]]:
    """A checkpoint's pending writes, by the task that made them, in order."""
    writes: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in pending or []:
        writes[task_id].append((channel, value))
    return writes


def _reads(config: RunnableConfig, seeded: CheckpointTuple) -> bool:
    """Whether `config` reads the seeded checkpoint: its thread's latest (nothing was written
    since it), or it by its id."""
    asked, held = config["configurable"], seeded.config["configurable"]
    return (
        asked["thread_id"] == held["thread_id"]
        and asked.get("checkpoint_ns", "") == held.get("checkpoint_ns", "")
        and get_checkpoint_id(config) in (None, held["checkpoint_id"])
    )
