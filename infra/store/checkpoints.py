"""Durable checkpoints: the Postgres saver on our pool, and copies between it and memory.

A turn runs on an in-memory copy of its thread and stores one checkpoint per run (the newest,
as the child of the one it was seeded from): a turn's end, a handoff point, a pending prompt.
Every branch head and every checkpoint an edit or a regenerate forks from is such a one, so the
supersteps between them are never needed again.

A list channel (`messages`, `tool_invocations`) would otherwise be stored whole at each of its
versions, so that a turn writes the entire history again and the thread grows with the square of
its length. `CompactSaver` stores a list as what it adds to the same channel's value in the
checkpoint it was made from: a `checkpoint_blobs` row whose type is `delta:<kept>:<base
version>` and whose blob holds the items after the first `kept` of the base version's value.
Reading a checkpoint follows that chain in one query down to a whole value (a blob of the
library's own shape, as every checkpoint written before deltas is) and rebuilds the list. A
saver given a `HistoryCache` (infra/store/history_cache.py) starts that chain from the decoded
value the cache holds at the base version, when it does, and reads no chain at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import DictRow

from agent.threads import ThreadId, thread_config
from infra.db import Conn, Pool
from infra.store.history_cache import HistoryCache, Key
from infra.store.turn_memory import TurnMemory, seeded, writes_by_task

DELTA = "delta"
# A channel's value at `version`: the blob rows from the whole value up, oldest first.
CHAIN_SQL = """
with recursive chain (version, type, blob, depth) as (
  select version, type, blob, 0 from langgraph.checkpoint_blobs
  where thread_id = %(thread_id)s and checkpoint_ns = %(ns)s and channel = %(channel)s
    and version = %(version)s
  union all
  select b.version, b.type, b.blob, c.depth + 1 from chain c
  join langgraph.checkpoint_blobs b
    on b.thread_id = %(thread_id)s and b.checkpoint_ns = %(ns)s and b.channel = %(channel)s
   and b.version = split_part(c.type, ':', 3)
  where c.type like 'delta:%%'
)
select type, blob from chain order by depth desc
"""


@dataclass(frozen=True)
class _Delta:
    """A list channel's stored value before its chain is read: the items after the first `kept`
    of its value at the `base` version."""

    base: str
    kept: int
    added: bytes


class CompactSaver(AsyncPostgresSaver):
    """The Postgres saver that stores list channels as deltas on a checkpoint's base."""

    _base: Checkpoint | None = None
    # Decoded lists by version, for `aget_tuple` (see infra/store/history_cache.py).
    cache: HistoryCache | None = None

    async def aput_after(
        self, base: Checkpoint | None, config: RunnableConfig, checkpoint: Checkpoint, metadata: Any
    ) -> RunnableConfig:
        """Store `checkpoint` with every channel version as new (stored ones stay as they are),
        its list channels as what they add to `base`'s (a stored checkpoint)."""
        self._base = base
        try:
            return await self.aput(
                config, checkpoint, metadata, dict(checkpoint["channel_versions"])
            )
        finally:
            self._base = None

    def _dump_blobs(
        self, thread_id: str, checkpoint_ns: str, values: dict[str, Any], versions: ChannelVersions
    ) -> list[tuple[str, str, str, str, str, bytes | None]]:
        rows: list[tuple[str, str, str, str, str, bytes | None]] = []
        for channel, version in versions.items():
            if channel not in values:
                dumped: tuple[str, bytes | None] = ("empty", None)
            else:
                dumped = self._delta(channel, str(version), values[channel]) or (
                    self.serde.dumps_typed(values[channel])
                )
            rows.append((thread_id, checkpoint_ns, channel, str(version), *dumped))
        return rows

    def _delta(self, channel: str, version: str, value: Any) -> tuple[str, bytes] | None:
        """`value` as what it adds to the base's value of `channel`, if both are lists."""
        base = self._base
        if base is None or not isinstance(value, list):
            return None
        base_version = base["channel_versions"].get(channel)
        base_value = base["channel_values"].get(channel)
        if base_version is None or str(base_version) == version or not isinstance(base_value, list):
            return None
        kept = 0
        for old, new in zip(base_value, value, strict=False):
            if old != new:
                break
            kept += 1
        kind, blob = self.serde.dumps_typed(value[kept:])
        return (f"{DELTA}:{kept}:{base_version}", blob) if kind == "msgpack" else None

    def _load_blobs(self, blob_values: list[tuple[bytes, bytes, bytes]]) -> dict[str, Any]:
        whole, deltas = [], {}
        for channel, kind, blob in blob_values or []:
            if kind.startswith(DELTA.encode() + b":"):
                _, kept, base = kind.decode().split(":", 2)
                deltas[channel.decode()] = _Delta(base, int(kept), blob)
            else:
                whole.append((channel, kind, blob))
        return {**super()._load_blobs(whole), **deltas}

    async def _load_checkpoint_tuple(self, value: DictRow) -> CheckpointTuple:
        """The library's, without its hop to a worker thread and back to decode pending writes
        when there are none, as at a turn's end: a turn's first token waits for that hop."""
        if value["pending_writes"]:
            return await super()._load_checkpoint_tuple(value)
        where = {"thread_id": value["thread_id"], "checkpoint_ns": value["checkpoint_ns"]}
        parent = value["parent_checkpoint_id"]
        stored: Checkpoint = value["checkpoint"]
        inline = stored.get("channel_values") or {}
        values = {**inline, **self._load_blobs(value["channel_values"])}
        return CheckpointTuple(
            {"configurable": {**where, "checkpoint_id": value["checkpoint_id"]}},
            {**stored, "channel_values": values},
            value["metadata"],
            {"configurable": {**where, "checkpoint_id": parent}} if parent else None,
            [],
        )

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = await super().aget_tuple(config)
        return await self.rebuilt(found, config["configurable"]["thread_id"])

    async def rebuilt(
        self, found: CheckpointTuple | None, thread_id: str
    ) -> CheckpointTuple | None:
        """`found`, a checkpoint of `thread_id` as read, with its lists whole (`_rebuilt`)."""
        if found is None:
            if self.cache is not None:  # a thread without checkpoints: nothing of it is kept
                self.cache.keep_only(thread_id)
            return None
        return await self._rebuilt(found, self.cache)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # Read whole first: the library holds its lock while the listing is consumed.
        listed = [t async for t in super().alist(config, filter=filter, before=before, limit=limit)]
        for found in listed:
            yield await self._rebuilt(found, None)

    async def _rebuilt(self, found: CheckpointTuple, cache: HistoryCache | None) -> CheckpointTuple:
        """`found` with each delta read down its chain into the whole list. With a `cache`, the
        lists start from the values it holds and it keeps those this checkpoint reads alone."""
        values = found.checkpoint["channel_values"]
        versions = found.checkpoint["channel_versions"]
        thread_id = str(found.config["configurable"]["thread_id"])
        ns = str(found.config["configurable"].get("checkpoint_ns", ""))
        used: list[Key] = []
        for channel, value in list(values.items()):
            if isinstance(value, _Delta):
                base: Key = (thread_id, ns, channel, value.base)
                values[channel] = await self._whole(base, value, cache)
                used.append(base)
            if cache is not None and isinstance(values[channel], list) and channel in versions:
                head: Key = (thread_id, ns, channel, str(versions[channel]))
                cache.put(head, values[channel])
                used.append(head)
        if cache is not None:
            cache.keep_only(thread_id, used)
        return found

    async def _whole(self, base: Key, delta: _Delta, cache: HistoryCache | None) -> list[Any]:
        """The list `delta` stands for: its base's value, from `cache` or down the chain, then
        what the delta adds. The base's value goes into `cache`."""
        held = cache.get(base) if cache is not None else None
        if held is not None:
            return self._applied(list(held), delta.kept, delta.added)
        thread_id, ns, channel, version = base
        params = {"thread_id": thread_id, "ns": ns, "channel": channel, "version": version}
        async with self._cursor() as cur:
            await cur.execute(CHAIN_SQL, params)
            rows = await cur.fetchall()
        if not rows or rows[0]["type"].startswith(f"{DELTA}:"):
            raise LookupError(f"{channel} of {thread_id} misses its base {version}")
        items: list[Any] = list(self.serde.loads_typed((rows[0]["type"], rows[0]["blob"])))
        for row in rows[1:]:
            items = self._applied(items, int(row["type"].split(":", 2)[1]), row["blob"])
        if cache is not None:
            cache.put(base, items)
        return self._applied(items, delta.kept, delta.added)

    def _applied(self, items: list[Any], kept: int, added: bytes) -> list[Any]:
        return items[:kept] + list(self.serde.loads_typed(("msgpack", added)))


def durable_saver(pool_or_conn: Pool | Conn, *, cache: HistoryCache | None = None) -> CompactSaver:
    """The saver on our own pool (never prepares statements; see infra.db), or on a connection
    inside a transaction so its writes commit together with ours. With a `cache`, its
    `aget_tuple` returns lists that share their items with it: for `load_latest_into_memory`."""
    saver = CompactSaver(pool_or_conn)
    saver.cache = cache
    return saver


async def load_latest_into_memory(
    durable: CompactSaver,
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
    return await seed_memory(memory, found)


async def seed_memory(memory: InMemorySaver, found: CheckpointTuple) -> str:
    """Copy the durable checkpoint `found` and its pending writes into `memory` (a TurnMemory
    hands it, as decoded, to its first read, and stores it when anything else needs it); its
    id."""
    parent_id = (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    child = _child_of(found, parent_id)
    if isinstance(memory, TurnMemory):
        memory.seed(child, found)
    else:
        versions = dict(found.checkpoint["channel_versions"])
        stored = await memory.aput(child, found.checkpoint, found.metadata, versions)
        await _put_writes(memory, stored, found.pending_writes)
    return str(found.checkpoint["id"])


async def copy_new_checkpoints(
    memory: InMemorySaver, durable: CompactSaver, thread_id: ThreadId, *, known: str | None
) -> CheckpointTuple | None:
    """Store the newest checkpoint `memory` holds, and its pending writes, as the child of
    `known` (the seeded one, None for a new thread): the supersteps between them are not kept.
    Returns the newest, as stored (None: `memory` holds none)."""
    newest = await memory.aget_tuple(thread_config(thread_id))
    if newest is None:
        return None
    if str(newest.checkpoint["id"]) == known:
        return newest
    # Read alone, as the newest is: each read of a checkpoint decodes the whole history.
    base = await seeded(memory, thread_config(thread_id, checkpoint_id=known)) if known else None
    stored = await durable.aput_after(
        base, _child_of(newest, known), newest.checkpoint, newest.metadata
    )
    await _put_writes(durable, stored, newest.pending_writes)
    return newest._replace(parent_config=_child_of(newest, known) if known else None)


def _child_of(item: CheckpointTuple, parent_id: str | None) -> RunnableConfig:
    """The config that stores `item` as the child of `parent_id`."""
    return {
        "configurable": {
            "thread_id": item.config["configurable"]["thread_id"],
            "checkpoint_ns": item.config["configurable"].get("checkpoint_ns", ""),
            **({"checkpoint_id": parent_id} if parent_id else {}),
        }
    }


async def _put_writes(
    saver: InMemorySaver | CompactSaver,
    stored: RunnableConfig,
    pending: Sequence[tuple[str, str, Any]] | None,
) -> None:
    for task_id, task_writes in writes_by_task(pending).items():
        await saver.aput_writes(stored, task_writes, task_id)
