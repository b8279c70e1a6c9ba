"""Throttled whole-draft writes for an assistant message as it streams, quick path or background.

Supabase Realtime sends every subscriber one event per committed row change, so the figure to
keep low is writes per second per message, not bytes: text is coalesced and the whole draft is
written at most every `interval` seconds, or sooner once `max_bytes` of new text piled up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from infra import telemetry
from infra.db import Conn, Pool
from infra.store.ids import ChatId, MessageId

logger = logging.getLogger(__name__)

CURRENT_SEQ_SQL = """
select seq, extract(epoch from clock_timestamp() - updated_at)::float8 as age
from public.message_draft where message_id = %s
"""
# A reply that ended has its final content: its draft goes.
DELETE_DRAFT_SQL = "delete from public.message_draft where message_id = %s"
# The seq guard makes an older write (say, from an attempt that lost its lease) a no-op, the
# length guard one that would show less than is shown (a round run again, or two attempts of it
# at once, start again from the text before the round): a draft never goes backwards. A message
# that ended (canceled while a round still streamed) gets no new draft.
UPSERT_DRAFT_SQL = """
insert into public.message_draft (message_id, chat_id, draft_content, seq, updated_at)
select %(message_id)s, %(chat_id)s, %(text)s, %(seq)s, now()
where exists (
  select 1 from public.message
  where id = %(message_id)s and status in ('queued', 'streaming')
)
on conflict (message_id) do update
set draft_content = excluded.draft_content, seq = excluded.seq, updated_at = excluded.updated_at
where public.message_draft.seq < excluded.seq
  and length(public.message_draft.draft_content) <= length(excluded.draft_content)
"""


class DraftWriter:
    def __init__(
        self,
        pool: Pool,
        *,
        message_id: MessageId,
        chat_id: ChatId,
        text: str = "",
        interval: float = 0.25,
        max_bytes: int = 2048,
        clock: Callable[[], float] = time.monotonic,
        best_effort: bool = False,
    ) -> None:
        """`best_effort`: a failed write is logged and skipped instead of raised (the quick path,
        whose client already has the text: a draft must not cost it its answer)."""
        self._pool = pool
        self._message_id = message_id
        self._chat_id = chat_id
        self._text = text
        self._interval = interval
        self._max_bytes = max_bytes
        self._clock = clock
        self._best_effort = best_effort
        self._seq = 0
        self._written = 0  # length of the text as last written
        self._last_write = float("-inf")
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None
        # A timed write's failure, raised by the next append or flush: a failed write must
        # fail the caller (a round is then run again) as when it is written at once.
        self._failure: Exception | None = None
        self.writes = 0

    @property
    def text(self) -> str:
        return self._text

    async def start(self) -> None:
        """Continue from the stored draft: after its seq, so a retried round never writes behind
        an older one, and its interval after its last write, whichever writer made it."""
        async with self._pool.connection() as conn:
            row = await (await conn.execute(CURRENT_SEQ_SQL, (self._message_id,))).fetchone()
        if row is not None:
            self._seq = int(row["seq"])
            self._last_write = self._clock() - max(0.0, row["age"])

    async def append(self, text: str) -> None:
        self._raise_failure()
        if not text:
            return
        self._text += text
        if len(self._text[self._written :].encode()) >= self._max_bytes:
            await self.flush()
            return
        if self._timer is not None:
            return  # a timed write is already due and will carry this text
        if not self._lock.locked() and self._due_in() <= 0:
            await self._write()
        else:
            # Text that arrives just before a pause still shows once the interval is up.
            self._timer = asyncio.create_task(self._write_when_due())

    async def flush(self) -> None:
        """Write what is pending now (round end, or a burst over `max_bytes`)."""
        self._raise_failure()
        self.discard()
        await self._write()

    def discard(self) -> None:
        """Drop what is pending: the reply's content is about to be final."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _due_in(self) -> float:
        return self._last_write + self._interval - self._clock()

    async def _write_when_due(self) -> None:
        async with self._lock:
            # Measured from when the last write landed, under the lock: a slow query cannot
            # bring two commits (two Realtime events) closer together than the interval.
            if (wait := self._due_in()) > 0:
                await asyncio.sleep(wait)
            # Past this point a flush cannot cancel us mid-query: it finds no timer and waits
            # for the lock instead.
            self._timer = None
            try:
                await self._write_locked()
            except Exception as exc:
                self._failure = exc

    def _raise_failure(self) -> None:
        if (failure := self._failure) is not None:
            self._failure = None
            raise failure

    async def _write(self) -> None:
        async with self._lock:
            await self._write_locked()

    async def _write_locked(self) -> None:
        text = self._text
        if len(text) == self._written:
            return
        self._seq += 1
        params = {
            "message_id": self._message_id,
            "chat_id": self._chat_id,
            "text": text,
            "seq": self._seq,
        }
        try:
            with telemetry.tracer.start_as_current_span(
                "draft write", attributes={"handoff.draft.seq": self._seq}
            ):
                async with self._pool.connection() as conn:
                    await conn.execute(UPSERT_DRAFT_SQL, params)
        except Exception:
            if not self._best_effort:
                raise
            logger.warning(
                "draft not written", extra={"message_id": str(self._message_id)}, exc_info=True
            )
        self._written = len(text)
        self._last_write = self._clock()
        self.writes += 1


async def delete_draft(conn: Conn, message_id: MessageId) -> None:
    await conn.execute(DELETE_DRAFT_SQL, (message_id,))
