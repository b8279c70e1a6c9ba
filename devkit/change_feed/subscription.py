"""One chat's changes for one user, as the SSE route (devkit/changes.py) reads them.

Takes INSERTs and UPDATEs of `public.message` and `public.message_draft` in one chat. DELETEs and
TRUNCATEs are not delivered: the old row of a delete carries its key only (no `chat_id` to filter
on), and a deleted row can no longer be checked against RLS.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING

from devkit.change_feed.errors import ChangeFeedError, SubscriberOverflow
from devkit.change_payloads import TABLE_KEYS, PostgresChange, visible_changes
from devkit.pgoutput import Change, RowChange
from infra.store.access import Claims
from infra.store.ids import ChatId

if TYPE_CHECKING:
    from devkit.change_feed.feed import ChangeFeed


class Subscription:
    """One chat's changes for one user. Every change committed after `ChangeFeed.subscribe`
    returned it is delivered (some committed shortly before may be too), in commit order."""

    def __init__(self, feed: ChangeFeed, claims: Claims, chat_id: ChatId, max_pending: int) -> None:
        self.claims = claims
        self.chat_id = chat_id
        self.max_pending = max_pending
        self._feed = feed
        self._pending: deque[RowChange] = deque()
        self._wake = asyncio.Event()
        self._error: ChangeFeedError | None = None

    def offer(self, changes: Sequence[Change]) -> bool:
        """Queue the batch's inserts and updates of the chat's messages and drafts; False (and
        the subscription failed) when too many are waiting."""
        if self._error is not None:
            return False
        for change in changes:
            if not self._wants(change):
                continue
            if len(self._pending) >= self.max_pending:
                self.fail(SubscriberOverflow("Too many changes were waiting: some were dropped."))
                return False
            assert isinstance(change, RowChange)
            self._pending.append(change)
            self._wake.set()
        return True

    def _wants(self, change: Change) -> bool:
        return (
            isinstance(change, RowChange)
            and change.kind != "DELETE"
            and change.table in TABLE_KEYS
            and change.new.get("chat_id") == str(self.chat_id)
        )

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
        await asyncio.shield(self._feed.detach(self))

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
