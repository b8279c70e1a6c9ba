"""One joined channel: the items the hub hands it, checked against its subscriber's RLS and sent
on its socket; its token, confirmed and refreshed; its client's broadcasts."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from devkit.change_feed import ChangeFeedError
from devkit.realtime import authorization as auth
from devkit.realtime.bindings import Binding, BindingError
from devkit.realtime.hub import Item, RowDelivery
from devkit.realtime.postgres_changes import change_data, check_bindings, visible_changes
from devkit.realtime.protocol import CLOSE, SYSTEM, Broadcast, Frame, Message
from devkit.realtime.tokens import TokenRefused

if TYPE_CHECKING:
    from devkit.realtime.socket import Session

logger = logging.getLogger(__name__)

MAX_PENDING = 1000
# Realtime confirms a channel's token at least this often, and when it expires.
CONFIRM_TOKEN_S = 300.0


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
        policies: auth.ReadPolicies | None,
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
                policies = await auth.read_policies(
                    self.hub.pool,
                    self.sub_topic,
                    verified.claims,
                    presence=bool(self.policies and self.policies.presence is not None),
                )
            except auth.PolicyError:
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
                    self.may_write = await auth.may_broadcast(
                        self.hub.pool, self.sub_topic, self.claims
                    )
                except auth.PolicyError:
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
        broadcasts = any(isinstance(item, Broadcast) for item in batch)
        if broadcasts and self.private and not await self._still_may_read():
            return
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

    async def _still_may_read(self) -> bool:
        if await auth.may_read(self.hub.pool, self.sub_topic, self.claims):
            return True
        await self.shutdown(f"You no longer may read from this Channel topic: {self.sub_topic}")
        return False

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
