"""Throttled draft writes for an assistant message as it streams, quick path or background.

Supabase Realtime sends every subscriber one event per committed write, so the figure to keep
low is writes per second per message: text is coalesced and written at most every `interval`
seconds, or sooner once `max_bytes` of new text piled up.

How a write reaches subscribers is the transport (DRAFT_TRANSPORT):

- `table`: the whole draft so far, as the reply's `message_draft` row, which Realtime sends as
  Postgres Changes (the row's RLS checked for every subscriber and every change).
- `broadcast`: the reply's `broadcast_draft` row (unlogged: no WAL) keeps the whole draft for the
  history, a cancel and a lease's end, and the same transaction sends what the write added with
  realtime.send() on the chat's private channel (`chat:<chat id>`), so a subscriber sees only
  committed drafts. Each broadcast's payload is `{messageId, seq, after, text}`: `text` follows
  the draft of seq `after`, or, with `after` null, is the whole draft (a writer's first write, or
  one that does not continue the stored draft).

Either way a draft never goes backwards (seq and length guards), and a reply that ended gets no
new draft: its final state is in `message`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Literal
from uuid import UUID

from infra import telemetry
from infra.db import Pool
from infra.settings import Settings
from infra.store.ids import ChatId, MessageId
from infra.store.statuses import WRITING_REPLY_STATUSES, with_statuses

logger = logging.getLogger(__name__)

DraftTransport = Literal["table", "broadcast"]
# The Realtime event of a broadcast draft, on the chat's private channel.
DRAFT_EVENT = "draft"

# Where the writer continues from, per transport.
CURRENT_SEQ_SQL = {
    "table": """
select seq, draft_content, extract(epoch from clock_timestamp() - updated_at)::float8 as age
from public.message_draft where message_id = %s
""",
    "broadcast": """
select seq, draft_content, extract(epoch from clock_timestamp() - updated_at)::float8 as age
from public.broadcast_draft where message_id = %s
""",
}
# The seq guard makes an older write (say, from an attempt that lost its lease) a no-op, the
# length guard one that would show less than is shown (two attempts of a round at once; one run
# again keeps what its earlier attempt showed, turns/shown.py): a draft never goes backwards.
# A message that ended (canceled while a round still streamed) gets no new draft.
UPSERT_DRAFT_SQL = with_statuses(
    """
insert into public.message_draft (message_id, chat_id, draft_content, seq, updated_at)
select %(message_id)s, %(chat_id)s, %(text)s, %(seq)s, now()
where exists (
  select 1 from public.message
  where id = %(message_id)s and status in ({writing})
)
on conflict (message_id) do update
set draft_content = excluded.draft_content, seq = excluded.seq, updated_at = excluded.updated_at
where public.message_draft.seq < excluded.seq
  and length(public.message_draft.draft_content) <= length(excluded.draft_content)
""",
    writing=WRITING_REPLY_STATUSES,
)
# The same write and guards on the unlogged row, then, only if it landed, the broadcast: what the
# write added to the draft it continues (read before the write, in the statement's snapshot),
# else the whole draft.
BROADCAST_DRAFT_SQL = with_statuses(
    """
with previous as (
  select draft_content, seq from public.broadcast_draft where message_id = %(message_id)s
), written as (
  insert into public.broadcast_draft (message_id, chat_id, draft_content, seq, updated_at)
  select %(message_id)s, %(chat_id)s, %(text)s, %(seq)s, now()
  where exists (
    select 1 from public.message
    where id = %(message_id)s and status in ({writing})
  )
  on conflict (message_id) do update
  set draft_content = excluded.draft_content, seq = excluded.seq, updated_at = excluded.updated_at
  where public.broadcast_draft.seq < excluded.seq
    and length(public.broadcast_draft.draft_content) <= length(excluded.draft_content)
  returning seq
), continued as (
  select seq as after, length(draft_content) as shown
  from previous where starts_with(%(text)s, draft_content)
)
select realtime.send(
  jsonb_build_object(
    'messageId', %(message_id)s::text,
    'seq', written.seq,
    'after', continued.after,
    'text', substr(%(text)s, coalesce(continued.shown, 0) + 1)
  ),
  %(event)s, %(topic)s, true
)
from written left join continued on true
""",
    writing=WRITING_REPLY_STATUSES,
)


def chat_topic(chat_id: UUID) -> str:
    """The chat's Realtime channel (private: its owner may join it, RLS on realtime.messages)."""
    return f"chat:{chat_id}"


class DraftWriter:
    def __init__(
        self,
        pool: Pool,
        *,
        reply_id: MessageId,
        chat_id: ChatId,
        text: str = "",
        interval: float = 0.25,
        max_bytes: int = 2048,
        clock: Callable[[], float] = time.monotonic,
        best_effort: bool = False,
        transport: DraftTransport = "table",
    ) -> None:
        """`best_effort`: a failed write is logged and skipped instead of raised (the quick path,
        whose client already has the text: a draft must not cost it its answer)."""
        self._pool = pool
        self._transport = transport
        self._reply_id = reply_id
        self._chat_id = chat_id
        self._text = text
        self._interval = interval
        self._max_bytes = max_bytes
        self._clock = clock
        self._best_effort = best_effort
        self._seq = 0
        self._written = ""  # the text as last written
        # The stored draft `start` found: what subscribers were last shown, by whichever writer.
        self.stored = ""
        self._last_write = float("-inf")
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None
        # A timed write's failure, raised by the next append or flush: a failed write must
        # fail the caller (a round is then run again) as when it is written at once.
        self._failure: Exception | None = None
        self.writes = 0

    @classmethod
    def for_reply(
        cls,
        pool: Pool,
        settings: Settings,
        *,
        reply_id: MessageId,
        chat_id: ChatId,
        text: str = "",
        best_effort: bool = False,
    ) -> DraftWriter:
        """A writer with the deployment's cadence and transport (DRAFT_INTERVAL_MS,
        DRAFT_MAX_BYTES, DRAFT_TRANSPORT)."""
        return cls(
            pool,
            reply_id=reply_id,
            chat_id=chat_id,
            text=text,
            interval=settings.draft_interval_ms / 1000,
            max_bytes=settings.draft_max_bytes,
            transport=settings.draft_transport,
            best_effort=best_effort,
        )

    @property
    def text(self) -> str:
        return self._text

    async def start(self) -> None:
        """Continue from the stored draft: after its seq, so a retried round never writes behind
        an older one, and its interval after its last write, whichever writer made it. Its
        text is `stored`, and is not written again."""
        async with self._pool.connection() as conn:
            query = CURRENT_SEQ_SQL[self._transport]
            row = await (await conn.execute(query, (self._reply_id,))).fetchone()
        if row is not None:
            self._seq = int(row["seq"])
            self._last_write = self._clock() - max(0.0, row["age"])
            self.stored = self._written = str(row["draft_content"])

    async def append(self, text: str) -> None:
        await self.show(self._text + text)

    async def show(self, text: str) -> None:
        """The draft is `text` from now on, whether or not it continues the one before (the
        store's guards still keep a draft from showing less than the stored one)."""
        self._raise_failure()
        if text == self._text:
            return
        self._text = text
        if len(text.encode()) - len(self._written.encode()) >= self._max_bytes:
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
        if text == self._written:
            return
        self._seq += 1
        params = {
            "message_id": self._reply_id,
            "chat_id": self._chat_id,
            "text": text,
            "seq": self._seq,
        }
        query = UPSERT_DRAFT_SQL
        if self._transport == "broadcast":
            query = BROADCAST_DRAFT_SQL
            params |= {"event": DRAFT_EVENT, "topic": chat_topic(self._chat_id)}
        try:
            with telemetry.tracer.start_as_current_span(
                "draft write", attributes={"handoff.draft.seq": self._seq}
            ):
                async with self._pool.connection() as conn:
                    await conn.execute(query, params)
        except Exception:
            if not self._best_effort:
                raise
            logger.warning(
                "draft not written", extra={"message_id": str(self._reply_id)}, exc_info=True
            )
        self._written = text
        self._last_write = self._clock()
        self.writes += 1
