"""The change feed's I/O: one temporary pgoutput slot per app process, polled, its batches handed
to every listener in commit order."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from contextlib import suppress
from typing import Protocol

import psycopg

from devkit.change_feed.errors import (
    ChangeFeedClosed,
    ChangeFeedError,
    ChangeFeedLost,
    ChangeFeedUnavailable,
)
from devkit.change_feed.subscription import Subscription
from devkit.pgoutput import Change, Decoder
from infra.db import Conn, Pool, connect
from infra.store.access import Claims, user_transaction
from infra.store.chats import require_chat
from infra.store.ids import ChatId

logger = logging.getLogger(__name__)

PUBLICATION = "supabase_realtime"
# Realtime's own, for realtime.messages (the migrations make it where Realtime's schema is absent).
MESSAGES_PUBLICATION = "supabase_realtime_messages_publication"
# What the migrations' realtime.send notifies when its transaction commits.
WAKE_CHANNEL = "realtime_messages"
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
PUBLICATIONS_SQL = "select pubname from pg_publication where pubname = any(%s) order by pubname"
LISTEN_SQL = f"listen {WAKE_CHANNEL}"


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


class FeedListener(Protocol):
    """What the feed hands each batch of decoded changes to, in commit order."""

    def offer(self, changes: Sequence[Change]) -> bool:
        """Take a batch; False when the listener failed and leaves the feed."""
        ...

    def fail(self, error: ChangeFeedError) -> None:
        """The feed stopped: changes may have been missed."""
        ...


class ChangeFeed:
    """One decoder per app process, shared by every listener: it runs while anyone listens.

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
        self.publications: list[str] = []
        self._listeners: set[FeedListener] = set()
        self._lock = asyncio.Lock()
        self._conn: Conn | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._listen_conn: Conn | None = None
        self._listen_task: asyncio.Task[None] | None = None

    async def subscribe(
        self, claims: Claims, chat_id: ChatId, *, max_pending: int | None = None
    ) -> Subscription:
        """A subscription, ready: every change committed from now on will reach it. It is
        dropped (SubscriberOverflow) when more than `max_pending` changes wait to be read.

        Raises ChatNotFound when the user does not see the chat, ChangeFeedUnavailable when
        the server cannot decode logically."""
        async with user_transaction(self.pool, claims) as conn:
            await require_chat(conn, chat_id)
        limit = self.max_pending if max_pending is None else max_pending
        subscription = Subscription(self, claims, chat_id, limit)
        await self.attach(subscription)
        return subscription

    async def attach(self, listener: FeedListener) -> None:
        """Hand `listener` every batch decoded from now on (the first listener starts the
        decoding). Raises ChangeFeedUnavailable when the server cannot decode logically."""
        async with self._lock:
            if self._task is not None and self._task.done():
                await self._stop()  # the decoder died: start afresh
            if self._task is None:
                await self._start()
            self._listeners.add(listener)

    async def detach(self, listener: FeedListener) -> None:
        """The last listener to leave stops the decoding. Idempotent."""
        async with self._lock:
            self._listeners.discard(listener)
            if not self._listeners:
                await self._stop()

    async def close(self) -> None:
        """Fail every listener and release the slot. Idempotent; a later listener starts the
        feed again."""
        async with self._lock:
            for listener in self._listeners:
                listener.fail(ChangeFeedClosed("The server is shutting down."))
            self._listeners.clear()
            await self._stop()

    async def _start(self) -> None:
        conn = await connect(self._database_url)
        slot = f"handoff_dev_{uuid.uuid4().hex[:16]}"
        try:
            await create_slot(conn, slot)
            names = [PUBLICATION, MESSAGES_PUBLICATION]
            rows = await (await conn.execute(PUBLICATIONS_SQL, (names,))).fetchall()
        except BaseException:
            await conn.close()
            raise
        self.publications = [r["pubname"] for r in rows]
        self._conn, self.slot = conn, slot
        self._stopping = asyncio.Event()
        if MESSAGES_PUBLICATION in self.publications:
            await self._start_listening()
        decoder = Decoder()
        self._task = asyncio.create_task(self._poll(conn, slot, decoder, self._stopping))
        logger.info("change feed started", extra={"slot": slot})

    async def _start_listening(self) -> None:
        """Poll at once when realtime.send's notification says a broadcast committed. Best
        effort: without it the feed still polls."""
        try:
            conn = await connect(self._database_url)
            await conn.execute(LISTEN_SQL)
        except psycopg.Error:
            logger.warning("change feed polls only: cannot listen", exc_info=True)
            return
        self._listen_conn = conn
        self._listen_task = asyncio.create_task(self._listen(conn))

    async def _listen(self, conn: Conn) -> None:
        try:
            async for _ in conn.notifies():
                self._wake.set()
        except psycopg.Error:
            logger.warning("change feed polls only: its listening connection failed")

    async def _stop(self) -> None:
        task, conn, slot = self._task, self._conn, self.slot
        self._task, self._conn, self.slot = None, None, None
        listen_task, listen_conn = self._listen_task, self._listen_conn
        self._listen_task, self._listen_conn = None, None
        if listen_task is not None:
            listen_task.cancel()
            await asyncio.wait({listen_task})
        if listen_conn is not None:
            await listen_conn.close()
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
        publications = ",".join(self.publications)
        try:
            while not stopping.is_set():
                self._wake.clear()
                cursor = await conn.execute(CHANGES_SQL, (slot, publications))
                rows = await cursor.fetchall()
                if rows:
                    self._dispatch(decoder.decode(bytes(r["data"]) for r in rows))
                await self._until_next_poll(stopping)
        except Exception:
            # A lost connection, bytes the parser refuses: listeners must learn they may have
            # missed changes rather than wait for ever.
            logger.exception("change feed failed", extra={"slot": slot})
            for listener in self._listeners:
                listener.fail(ChangeFeedLost("The change feed stopped; reload the chat."))
            self._listeners.clear()

    async def _until_next_poll(self, stopping: asyncio.Event) -> None:
        """The poll interval, or less: until a broadcast's notification, or the stop."""
        wake = asyncio.ensure_future(self._wake.wait())
        stop = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait(
                {wake, stop}, timeout=self._poll_interval_s, return_when="FIRST_COMPLETED"
            )
        finally:
            wake.cancel()
            stop.cancel()

    def _dispatch(self, changes: list[Change]) -> None:
        if not changes:
            return
        for listener in list(self._listeners):
            if not listener.offer(changes):
                self._listeners.discard(listener)
