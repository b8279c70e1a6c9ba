"""Stopping a background job, and the fence that keeps a stopped job's run from writing.

Canceling is a database write first: the job and its message end `canceled` in one transaction,
so the user's view is settled at once, whatever the run is doing. Inngest's cancel (the
`chat/cancel` event) then stops the run at its next step, and until then every write of the run
that matters goes through `hold_job`, which only a run still holding a live job passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.chat_store import (
    CHAT_VISIBLE_SQL,
    DELETE_DRAFT_SQL,
    SERVICE_ROLE_SQL,
    ChatId,
    ChatNotFound,
    MessageId,
    user_transaction,
)
from infra.db import Conn, Pool

CANCEL_JOB_SQL = """
update public.job_runs set status = 'canceled', updated_at = now()
where chat_id = %s and assistant_id = %s and status in ('queued', 'processing')
returning idempotency_key, root_message_id
"""
# The message keeps what the user saw: its latest draft, else the text the quick path streamed.
CANCEL_MESSAGE_SQL = """
update public.message m
set content = coalesce(
      (select d.draft_content from public.message_draft d where d.message_id = m.id), m.content),
    status = 'canceled', updated_at = now()
where m.id = %s and m.status in ('queued', 'streaming', 'awaiting_approval')
"""
# The update is the heartbeat too: a run that keeps writing keeps its lease.
HOLD_JOB_SQL = """
update public.job_runs set updated_at = now()
where idempotency_key = %s and status = 'processing' and run_id = %s
returning id
"""


@dataclass(frozen=True)
class CanceledJob:
    idempotency_key: str
    # None for a turn still on its quick path: that path stores its own reply as canceled.
    message_id: MessageId | None


async def cancel_active_job(
    pool: Pool, claims: dict[str, Any], *, chat_id: ChatId, assistant_id: str
) -> CanceledJob | None:
    """Cancel the chat's running job for the assistant; None when there is none (idle).

    The chat is looked up under the user's RLS, so another user's chat is ChatNotFound; the
    job and message writes are the service's, as the Data API roles cannot write jobs.
    """
    async with user_transaction(pool, claims) as conn:
        if await (await conn.execute(CHAT_VISIBLE_SQL, (chat_id,))).fetchone() is None:
            raise ChatNotFound(chat_id)
        await conn.execute(SERVICE_ROLE_SQL)
        return await cancel_job_in(conn, chat_id, assistant_id)


async def cancel_job_in(conn: Conn, chat_id: ChatId, assistant_id: str) -> CanceledJob | None:
    """Cancel the active job of the chat and assistant within `conn`'s transaction."""
    row = await (await conn.execute(CANCEL_JOB_SQL, (chat_id, assistant_id))).fetchone()
    if row is None:
        return None
    message_id = row["root_message_id"]
    if message_id is not None:
        await conn.execute(CANCEL_MESSAGE_SQL, (message_id,))
        await conn.execute(DELETE_DRAFT_SQL, (message_id,))
    return CanceledJob(row["idempotency_key"], message_id)


async def hold_job(conn: Conn, idempotency_key: str, run_id: str) -> bool:
    """Lock the job for the rest of `conn`'s transaction if `run_id` still holds it running.

    Writes made in that transaction land only while the job is live, and a cancel waits for
    them to commit: they never land after it.
    """
    row = await (await conn.execute(HOLD_JOB_SQL, (idempotency_key, run_id))).fetchone()
    return row is not None
