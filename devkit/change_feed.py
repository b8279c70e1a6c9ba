"""The development change feed: Supabase Realtime's `postgres_changes`, without Realtime.

Realtime reads the WAL of the tables in the `supabase_realtime` publication through a logical
replication slot and sends each subscriber the row changes its RLS lets it see. Locally there is
no Realtime server, so `ChangeFeed` does the same for one app process: one temporary pgoutput
slot (the server drops it with the connection, so a dead dev server retains no WAL), polled
about every 100 ms as Realtime polls its own, fanned out to subscribers of one chat each.

Only INSERTs and UPDATEs of `public.message` and `public.message_draft` are delivered. DELETEs
and TRUNCATEs are not: the old row of a delete carries its key only (no `chat_id` to filter
on), and a deleted row can no longer be checked against RLS.

A change is checked when the subscriber reads it, by looking its row up by primary key under the
subscriber's RLS, as Realtime checks it (by primary key, when it reads the slot). So a row deleted
before the check (a draft its reply's completion removed) is not delivered, nor is one whose chat
is no longer the subscriber's.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from contextlib import suppress
from typing import Any

import psycopg

from devkit.change_payloads import TABLE_KEYS, PostgresChange, visible_changes
from devkit.pgoutput import Change, Decoder, RowChange
from infra.db import Conn, Pool, connect
from infra.store.access import user_transaction
from infra.store.chats import require_chat
from infra.store.ids import ChatId

logger = logging.getLogger(__name__)

PUBLICATION = "supabase_realtime"
POLL_INTERVAL_S = 0.1
MAX_PENDING = 1000

WAL_LEVEL_SQL = "select current_setting('wal_level') as wal_level"
# Temporary: bound to this connection, dropped by the server when the connection ends.
CREATE_SLOT_SQL = "select pg_create_logical_replication_slot(%s, 'pgoutput', temporary => true)"
DROP_SLOT_SQL = "select pg_drop_replication_slot(%s)"
CHANGES_SQL = """
select data from pg_logical_slot_get_binary_changes(
  %s, null, null, 'proto_version', '1', 'publication_names', %s)
"""


class ChangeFeedError(RuntimeError):
    """The change feed cannot deliver (any more) changes to a subscriber."""


class ChangeFeedUnavailable(ChangeFeedError):
    """The database cannot decode its WAL logically (wal_level, privileges, slots)."""


class SubscriberOverflow(ChangeFeedError):
    """The subscriber fell too far behind and was dropped."""


class ChangeFeedLost(ChangeFeedError):
    """The feed's connection or decoding failed; the subscriber may have missed changes."""


class ChangeFeedClosed(ChangeFeedError):
    """The app is shutting down."""


async def create_slot(conn: Conn, slot: str) -> None:
    """A temporary pgoutput slot on `conn`; ChangeFeedUnavailable, saying what to change,
    when the server cannot have one."""
    row = await (await conn.execute(WAL_LEVEL_SQL)).fetchone()
    level = row["wal_level"] if row else "unknown"
    if level != "logical":
        raise ChangeFeedUnavailable(
            f"The database runs with wal_level={level}; the change feed needs logical decoding."
            " Run `ALTER SYSTEM SET wal_level = logical` as a superuser and restart Postgres."
        )
    try:
        await conn.execute(CREATE_SLOT_SQL, (slot,))
    except psycopg.errors.InsufficientPrivilege as error:
        raise ChangeFeedUnavailable(f"Cannot create a replication slot: {error}") from error
    except psycopg.errors.ConfigurationLimitExceeded as error:
        hint = "raise max_replication_slots or drop unused slots"
        raise ChangeFeedUnavailable(f"{error}: {hint}.") from error


class Subscription:
    """One chat's changes for one user. Every change committed after `ChangeFeed.subscribe`
    returned it is delivered (some committed shortly before may be too), in commit order."""

    def __init__(
        self, feed: ChangeFeed, claims: dict[str, Any], chat_id: ChatId, max_pending: int
    ) -> None:
        self.claims = claims
        self.chat_id = chat_id
        self.max_pending = max_pending
        self._feed = feed
        self._pending: deque[RowChange] = deque()
        self._wake = asyncio.Event()
        self._error: ChangeFeedError | None = None

    def offer(self, change: RowChange) -> bool:
        """Queue a change of the chat; False (and the subscription failed) when full."""
        if self._error is not None:
            return False
        if len(self._pending) >= self.max_pending:
            self.fail(SubscriberOverflow("Too many changes were waiting: some were dropped."))
            return False
        self._pending.append(change)
        self._wake.set()
        return True

    def fail(self, error: ChangeFeedError) -> None:
        if self._error is None:
            self._error = error
            self._pending.clear()
            self._wake.set()

    async def next(self, max_wait_s: float | None = None) -> list[PostgresChange]:
        """The next changes the user may see; [] if none came within `max_wait_s` seconds.
        Raises the ChangeFeedError that ended the subscription.

        Its own limit rather than an `asyncio.timeout` around it: cancelled during the RLS
        check, it would lose the changes being checked."""
        loop = asyncio.get_running_loop()
        deadline = None if max_wait_s is None else loop.time() + max_wait_s
        while True:
            if self._error is not None:
                raise self._error
            if self._pending:
                batch = list(self._pending)
                self._pending.clear()
                visible = await visible_changes(self._feed.pool, self.claims, self.chat_id, batch)
                if visible:
                    return visible
                continue
            self._wake.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return []
            with suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._wake.wait()

    async def close(self) -> None:
        """Leave the feed (the last subscriber to leave stops the decoding). Idempotent."""
        await asyncio.shield(self._feed.unsubscribe(self))

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


class ChangeFeed:
    """One decoder per app process, shared by every subscriber: it runs while anyone listens.

    `database_url` is where the slot is made (a direct connection: a transaction pooler cannot
    hold a slot's session); `pool` runs the subscribers' RLS checks.
    """

    def __init__(
        self,
        database_url: str,
        pool: Pool,
        *,
        poll_interval_s: float = POLL_INTERVAL_S,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.pool = pool
        self.max_pending = max_pending
        self.slot: str | None = None
        self._database_url = database_url
        self._poll_interval_s = poll_interval_s
        self._subscribers: set[Subscription] = set()
        self._lock = asyncio.Lock()
        self._conn: Conn | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def subscribe(
        self, claims: dict[str, Any], chat_id: ChatId, *, max_pending: int | None = None
    ) -> Subscription:
        """A subscription, ready: every change committed from now on will reach it. It is
        dropped (SubscriberOverflow) when more than `max_pending` changes wait to be read.

        Raises ChatNotFound when the user does not see the chat, ChangeFeedUnavailable when
        the server cannot decode logically."""
        async with user_transaction(self.pool, claims) as conn:
            await require_chat(conn, chat_id)
        async with self._lock:
            if self._task is not None and self._task.done():
                await self._stop()  # the decoder died: start afresh
            if self._task is None:
                await self._start()
            limit = self.max_pending if max_pending is None else max_pending
            subscription = Subscription(self, claims, chat_id, limit)
            self._subscribers.add(subscription)
        return subscription

    async def unsubscribe(self, subscription: Subscription) -> None:
        async with self._lock:
            self._subscribers.discard(subscription)
            if not self._subscribers:
                await self._stop()

    async def close(self) -> None:
        """End every subscription and release the slot. Idempotent; a later subscriber starts
        the feed again."""
        async with self._lock:
            for subscription in self._subscribers:
                subscription.fail(ChangeFeedClosed("The server is shutting down."))
            self._subscribers.clear()
            await self._stop()

    async def _start(self) -> None:
        conn = await connect(self._database_url)
        slot = f"handoff_dev_{uuid.uuid4().hex[:16]}"
        try:
            await create_slot(conn, slot)
        except BaseException:
            await conn.close()
            raise
        self._conn, self.slot = conn, slot
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._poll(conn, slot, Decoder(), self._stopping))
        logger.info("change feed started", extra={"slot": slot})

    async def _stop(self) -> None:
        task, conn, slot = self._task, self._conn, self.slot
        self._task, self._conn, self.slot = None, None, None
        if task is not None:
            self._stopping.set()
            await asyncio.wait({task})
        if conn is not None:
            # Dropped here, not left to the connection's end, so it is gone when this returns.
            with suppress(psycopg.Error):
                await conn.execute(DROP_SLOT_SQL, (slot,))
            await conn.close()
            logger.info("change feed stopped", extra={"slot": slot})

    async def _poll(self, conn: Conn, slot: str, decoder: Decoder, stopping: asyncio.Event) -> None:
        try:
            while not stopping.is_set():
                cursor = await conn.execute(CHANGES_SQL, (slot, PUBLICATION))
                rows = await cursor.fetchall()
                if rows:
                    self._dispatch(decoder.decode(bytes(r["data"]) for r in rows))
                with suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_interval_s):
                        await stopping.wait()
        except Exception:
            # A lost connection, bytes the parser refuses: subscribers must learn they may have
            # missed changes rather than wait for ever.
            logger.exception("change feed failed", extra={"slot": slot})
            for subscription in self._subscribers:
                subscription.fail(ChangeFeedLost("The change feed stopped; reload the chat."))
            self._subscribers.clear()

    def _dispatch(self, changes: list[Change]) -> None:
        for change in changes:
            if not isinstance(change, RowChange) or change.kind == "DELETE":
                continue
            if change.table not in TABLE_KEYS:
                continue
            chat_id = change.new.get("chat_id")
            for subscription in list(self._subscribers):
                if str(subscription.chat_id) == chat_id and not subscription.offer(change):
                    self._subscribers.discard(subscription)
