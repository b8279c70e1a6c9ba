"""Joined channels and what reaches them: the hub takes every batch the change feed decodes and
hands each channel, in commit order, the broadcasts of its topic and the row changes its bindings
match; each channel checks row changes against its subscriber's RLS and sends them.

The work per change is Realtime's: a broadcast is encoded once per serializer and sent to every
subscriber of its topic (a private channel's subscriber was authorized when it joined); a row
change costs every subscriber whose binding it matches an RLS check (one transaction per
subscriber per batch), as Realtime runs its prepared statement once per subscription.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from devkit.change_feed import ChangeFeed, ChangeFeedError, ChangeFeedUnavailable
from devkit.pgoutput import Change, Relation, RowChange
from devkit.realtime.authorization import PolicyError, ReadPolicies, may_broadcast, read_policies
from devkit.realtime.bindings import Binding, BindingError
from devkit.realtime.postgres_changes import (
    Column,
    change_data,
    check_bindings,
    table_columns,
    visible_changes,
)
from devkit.realtime.protocol import CLOSE, SYSTEM, Broadcast, Frame, Message
from devkit.realtime.tokens import RealtimeTokens, TokenRefused
from infra.db import Pool

if TYPE_CHECKING:
    from devkit.realtime.socket import Session

logger = logging.getLogger(__name__)

MAX_PENDING = 1000
# Realtime confirms a channel's token at least this often, and when it expires.
CONFIRM_TOKEN_S = 300.0


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


class Channel:
    """One joined topic of one socket."""

    def __init__(
        self,
        session: Session,
        *,
        topic: str,
        join_ref: str | None,
        token: str,
        claims: dict[str, Any],
        private: bool,
        bindings: list[Binding],
        self_broadcast: bool,
        ack_broadcast: bool,
        policies: ReadPolicies | None,
    ) -> None:
        self.session = session
        self.hub = session.hub
        self.topic = topic
        self.sub_topic = topic.removeprefix("realtime:")
        self.join_ref = join_ref
        self.token = token
        self.claims = claims
        self.private = private
        self.bindings = bindings
        self.self_broadcast = self_broadcast
        self.ack_broadcast = ack_broadcast
        self.policies = policies
        self.may_write: bool | None = None
        self.closed = False
        self._pending: deque[Item] = deque()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def role(self) -> str:
        return str(self.claims.get("role", ""))

    def start(self, expires_in_s: float) -> None:
        self._tasks = [
            asyncio.create_task(self._deliver()),
            asyncio.create_task(self._confirm_token(expires_in_s)),
        ]

    def offer(self, item: Item) -> None:
        if self.closed:
            return
        if len(self._pending) >= MAX_PENDING:
            self._pending.clear()
            self._later(self.shutdown("Too many changes were waiting: some were dropped."))
            return
        self._pending.append(item)
        self._wake.set()

    def feed_lost(self, error: ChangeFeedError) -> None:
        """Changes may have been missed: say so; a client that rejoins gets a working feed."""
        if self.closed:
            return
        self.push_system("postgres_changes", "error", str(error))

    def push_system(self, extension: str, status: str, message: str) -> None:
        payload = {
            "extension": extension,
            "status": status,
            "message": message,
            "channel": self.sub_topic,
        }
        self.session.push(Message(self.topic, SYSTEM, payload, None, self.join_ref))

    async def check_bindings(self) -> str | None:
        """Realtime's message when the bindings cannot be subscribed."""
        if not self.bindings:
            return None
        try:
            async with self.hub.pool.connection() as conn, conn.transaction():
                await check_bindings(conn, self.role, self.bindings)
        except BindingError as error:
            self.bindings = []
            return str(error)
        return None

    async def refresh(self, token: Any) -> None:
        """The `access_token` event (Realtime's handle_in): a new token for this channel."""
        if not isinstance(token, str) or token.startswith("sb_") or token == self.token:
            return
        try:
            verified = await self.hub.tokens.verify(token)
        except TokenRefused as refused:
            await self.shutdown(refused.message)
            return
        if self.private:
            try:
                policies = await read_policies(
                    self.hub.pool,
                    self.sub_topic,
                    verified.claims,
                    presence=bool(self.policies and self.policies.presence is not None),
                )
            except PolicyError:
                await self.shutdown("Realtime was unable to connect to the project database")
                return
            previous = self.policies
            if previous is not None and (
                (previous.broadcast and not policies.broadcast)
                or (previous.presence and policies.presence is False)
            ):
                await self.shutdown(
                    f"You no longer have permission to read from this Channel topic:"
                    f" {self.sub_topic}"
                )
                return
            self.policies = policies
            self.may_write = None
        self.token, self.claims = token, verified.claims
        self._restart_confirm(verified.expires_in_s)

    async def client_broadcast(self, message: Message) -> None:
        """A broadcast pushed by this channel's client (Realtime's BroadcastHandler)."""
        payload = message.payload
        if isinstance(payload, Broadcast):
            broadcast = payload
        elif isinstance(payload, dict) and isinstance(payload.get("event"), str):
            broadcast = Broadcast(payload["event"], payload)
        else:
            return
        if self.private:
            if self.may_write is None:
                try:
                    self.may_write = await may_broadcast(self.hub.pool, self.sub_topic, self.claims)
                except PolicyError:
                    logger.warning("broadcast policy failed", extra={"topic": self.sub_topic})
                    return
            if not self.may_write:
                return  # Realtime drops it, unacknowledged
        self.hub.broadcast_from(self, broadcast)
        if self.ack_broadcast:
            self.session.reply(message, "ok", {})

    async def shutdown(self, reason: str) -> None:
        """Realtime's shutdown_response: a `system` error saying why, then the channel closes."""
        if self.closed:
            return
        self.push_system("system", "error", reason)
        await self.close()

    async def close(self, *, notify: bool = True) -> None:
        """Leave the hub; `notify`: tell the client (phx_close)."""
        if self.closed:
            return
        self.closed = True
        if notify:
            self.session.push(Message(self.topic, CLOSE, {}, self.join_ref, self.join_ref))
        self.session.forget(self)
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        await self.hub.leave(self)

    def _later(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self.session.keep(task)

    def _restart_confirm(self, expires_in_s: float) -> None:
        if len(self._tasks) == 2:
            old = self._tasks.pop()
            if old is not asyncio.current_task():
                old.cancel()
            self._tasks.append(asyncio.create_task(self._confirm_token(expires_in_s)))

    async def _confirm_token(self, expires_in_s: float) -> None:
        """At the token's expiry (or every 5 minutes), check it again; an expired one ends the
        channel, as Realtime's confirm_token does."""
        await asyncio.sleep(max(0.0, min(CONFIRM_TOKEN_S, expires_in_s)))
        try:
            verified = await self.hub.tokens.verify(self.token)
        except TokenRefused as refused:
            await self.shutdown(refused.message)
            return
        self._restart_confirm(verified.expires_in_s)

    async def _deliver(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._pending:
                    batch = list(self._pending)
                    self._pending.clear()
                    await self._send(batch)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("realtime delivery failed", extra={"topic": self.sub_topic})
            await self.shutdown("Realtime was unable to deliver changes: please rejoin")

    async def _send(self, batch: list[Item]) -> None:
        rows = [item for item in batch if isinstance(item, RowDelivery)]
        visible: dict[int, bool] = {}
        if rows:
            changes = [r.change for r in rows]
            keys = {c.relation: await self.hub.key_types(c.relation, self.role) for c in changes}
            async with self.hub.pool.connection() as conn:
                # (timed once it has a connection: the check's own cost, not the wait for one)
                started = time.perf_counter()
                seen = await visible_changes(conn, self.claims, changes, keys)
                self.hub.stats.rls_seconds += time.perf_counter() - started
            self.hub.stats.rls_checks += 1
            self.hub.stats.rls_rows += len(rows)
            visible = {id(r): v for r, v in zip(rows, seen, strict=True)}
        serializer = self.session.serializer
        for item in batch:
            if self.closed:
                return
            if isinstance(item, Broadcast):
                frame = self._broadcast_frame(item)
                if frame is not None:
                    self.session.send(frame)
                    self.hub.stats.changes_sent += 1
            elif visible.get(id(item)):
                for ids, data in await self._postgres_changes(item):
                    self.session.send(serializer.postgres_change(self.topic, ids, data))
                    self.hub.stats.changes_sent += 1

    def _broadcast_frame(self, broadcast: Broadcast) -> Frame | None:
        """The broadcast as this subscriber's serializer sends it, encoded once per serializer;
        None when it cannot be (a V2 binary frame holds at most 255 bytes of topic and event):
        this subscriber goes without it, and keeps its channel."""
        serializer = self.session.serializer
        key = (serializer.vsn, self.topic)
        if key not in broadcast.frames:
            try:
                broadcast.frames[key] = serializer.broadcast(self.topic, broadcast)
            except (ValueError, TypeError, RecursionError) as error:
                logger.warning(
                    "broadcast dropped for its subscribers on this protocol",
                    extra={"topic": self.sub_topic, "vsn": serializer.vsn, "reason": str(error)},
                )
                broadcast.frames[key] = None
        return broadcast.frames[key]

    async def _postgres_changes(self, item: RowDelivery) -> list[tuple[list[int], str]]:
        """The change's messages: one per distinct column selection among the bindings it
        matched, with their ids."""
        groups: dict[tuple[str, ...] | None, list[int]] = {}
        for binding in self.bindings:
            if binding.matches(item.change):
                select = tuple(binding.select) if binding.select is not None else None
                groups.setdefault(select, []).append(binding.id)
        out = []
        for select, ids in groups.items():
            key = (self.role, select)
            if key not in item.data:
                columns = await self.hub.columns(item.change.relation, self.role)
                item.data[key] = change_data(
                    item.change, columns, list(select) if select is not None else None
                )
            out.append((ids, item.data[key]))
        return out


def flexible_bool(value: Any) -> bool:
    """Realtime's FlexibleBoolean: true, "true" (any case) and 1 are true."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True or value == 1
