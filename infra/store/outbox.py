"""The jobs whose `chat/tool_handoff` event is not known to have been sent.

A job row is its own outbox entry: the request that hands off commits the row, then sends the
event and marks it sent. A crash or an Inngest outage in between leaves `event_sent_at` null,
and the outbox relay sends it again with the same id, which Inngest deduplicates.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.db import Pool
from infra.events import TurnPayload
from infra.store.ids import ChatId

MARK_SENT_SQL = """
update public.job_runs set event_sent_at = now(), updated_at = now()
where idempotency_key = any(%s) and event_sent_at is null
"""
# Younger rows are left to the request that created them, which sends right after its commit.
UNSENT_SQL = """
select idempotency_key, payload from public.job_runs
where event_sent_at is null and status = 'queued'
  and created_at < now() - make_interval(secs => %(older_than_s)s)
order by created_at
limit %(limit)s
"""
UNSENT_OF_CHAT_SQL = """
select idempotency_key, payload from public.job_runs
where chat_id = %s and assistant_id = %s and status = 'queued' and event_sent_at is null
  and kind = 'turn'
"""


@dataclass(frozen=True)
class UnsentJob:
    idempotency_key: str
    payload: TurnPayload


async def mark_sent(pool: Pool, job_keys: list[str]) -> None:
    async with pool.connection() as conn:
        await conn.execute(MARK_SENT_SQL, (job_keys,))


async def unsent(pool: Pool, *, older_than_s: float, limit: int) -> list[UnsentJob]:
    """Queued jobs whose event was never confirmed sent, oldest first."""
    async with pool.connection() as conn:
        params = {"older_than_s": older_than_s, "limit": limit}
        rows = await (await conn.execute(UNSENT_SQL, params)).fetchall()
    return [UnsentJob(r["idempotency_key"], r["payload"]) for r in rows]


async def unsent_of(pool: Pool, chat_id: ChatId, assistant_id: str) -> list[UnsentJob]:
    """The chat's turns that waited, took the slot when the job ahead ended, and were not sent."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(UNSENT_OF_CHAT_SQL, (chat_id, assistant_id))).fetchall()
    return [UnsentJob(r["idempotency_key"], r["payload"]) for r in rows]
