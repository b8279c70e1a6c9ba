"""The hub: every joined channel of the app, and its one listener on the change feed. It takes
every batch the feed decodes and hands each channel (channels.py), in commit order, the broadcasts
of its topic and the row changes its bindings match.

The work per change is Realtime's: a broadcast is encoded once per serializer and sent to every
subscriber of its topic (on a private channel, one whose read policies still let them read it,
asked once per subscriber per batch); a row
change costs every subscriber whose binding it matches an RLS check (one transaction per
subscriber per batch), as Realtime runs its prepared statement once per subscription.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devkit.change_feed import ChangeFeed, ChangeFeedError, ChangeFeedUnavailable
from devkit.pgoutput import Change, Relation, RowChange
from devkit.realtime.postgres_changes import Column, table_columns
from devkit.realtime.protocol import Broadcast
from devkit.realtime.tokens import RealtimeTokens
from infra.db import Pool

if TYPE_CHECKING:
    from devkit.realtime.channels import Channel
    from devkit.realtime.socket import Session


@dataclass
class Stats:
    """What delivering cost, for the benchmarks: RLS transactions, the rows they checked and the
    time they took on their connection, frames and bytes sent (all of them), the frames among them
    that carried a change or a broadcast, broadcasts fanned out, row changes handed to a
    channel."""

    rls_checks: int = 0
    rls_rows: int = 0
    rls_seconds: float = 0.0
    frames: int = 0
    bytes: int = 0
    changes_sent: int = 0
    broadcasts: int = 0
    row_deliveries: int = 0


@dataclass
class RowDelivery:
    """A row change on its way to the channels it matched; its `data` is built once per role
    and column selection."""

    change: RowChange
    data: dict[tuple[str, tuple[str, ...] | None], str] = field(default_factory=dict)


Item = Broadcast | RowDelivery


def database_broadcast(change: RowChange) -> tuple[str, bool, Broadcast] | None:
    """A realtime.messages insert as Realtime broadcasts it: topic, privacy and the broadcast."""
    relation = change.relation
    if change.kind != "INSERT" or relation.namespace != "realtime":
        return None
    if not relation.name.startswith("messages"):
        return None
    row = change.new
    if row.get("extension") != "broadcast" or not isinstance(row.get("topic"), str):
        return None
    payload = row.get("payload")
    if payload is None or not isinstance(row.get("event"), str):
        return None
    meta = {"id": row["id"]} if row.get("id") else None
    return row["topic"], bool(row.get("private")), Broadcast(row["event"], payload, meta, True)


class Hub:
    """Every joined channel of the app, and its one listener on the change feed."""

    def __init__(self, pool: Pool, feed: ChangeFeed, tokens: RealtimeTokens) -> None:
        self.pool = pool
        self.feed = feed
        self.tokens = tokens
        self.stats = Stats()
        self.sessions: set[Session] = set()
        self._topics: defaultdict[tuple[str, bool], set[Channel]] = defaultdict(set)
        self._channels: set[Channel] = set()
        self._attached = False
        self._lock = asyncio.Lock()
        self._columns: dict[tuple[Relation, str], list[Column]] = {}

    # The change feed's listener.
    def offer(self, changes: Sequence[Change]) -> bool:
        with_bindings = [c for c in self._channels if c.bindings]
        for change in changes:
            if not isinstance(change, RowChange):
                continue
            broadcast = database_broadcast(change)
            if broadcast is not None:
                topic, private, message = broadcast
                self.stats.broadcasts += 1
                for channel in list(self._topics.get((topic, private), ())):
                    channel.offer(message)
                continue
            delivery = None
            for channel in with_bindings:
                if any(b.matches(change) for b in channel.bindings):
                    delivery = delivery or RowDelivery(change)
                    self.stats.row_deliveries += 1
                    channel.offer(delivery)
        return True

    def fail(self, error: ChangeFeedError) -> None:
        self._attached = False
        for channel in list(self._channels):
            channel.feed_lost(error)

    async def join(self, channel: Channel) -> ChangeFeedUnavailable | None:
        """Deliver to `channel` from now on; the feed's refusal when it cannot decode."""
        async with self._lock:
            self._channels.add(channel)
            self._topics[channel.sub_topic, channel.private].add(channel)
            if self._attached:
                return None
            try:
                await self.feed.attach(self)
            except ChangeFeedUnavailable as error:
                return error
            self._attached = True
            return None

    async def leave(self, channel: Channel) -> None:
        async with self._lock:
            self._channels.discard(channel)
            subscribers = self._topics.get((channel.sub_topic, channel.private))
            if subscribers is not None:
                subscribers.discard(channel)
                if not subscribers:
                    del self._topics[channel.sub_topic, channel.private]
            if not self._channels and self._attached:
                self._attached = False
                await self.feed.detach(self)

    def broadcast_from(self, sender: Channel, message: Broadcast) -> None:
        """A client's broadcast, to the topic's other subscribers (and itself when it asked)."""
        self.stats.broadcasts += 1
        for channel in list(self._topics.get((sender.sub_topic, sender.private), ())):
            if channel is not sender or sender.self_broadcast:
                channel.offer(message)

    async def columns(self, relation: Relation, role: str) -> list[Column]:
        """The relation's columns as `role` may read them (cached: a relation changes shape only
        with a new Relation message)."""
        key = (relation, role)
        if key not in self._columns:
            async with self.pool.connection() as conn:
                self._columns[key] = await table_columns(conn, relation.oid, role)
        return self._columns[key]

    async def key_types(self, relation: Relation, role: str) -> list[str]:
        """The SQL types of the relation's key columns, to look rows up by their key."""
        types = {c.name: c.sql_type for c in await self.columns(relation, role)}
        return [types[c.name] for c in relation.columns if c.part_of_key]

    async def close(self) -> None:
        for session in list(self.sessions):
            await session.close(1012)
