"""Pausing a running background job, and resuming it (the job's side is in turns/job.py).

    pause:   a request on the job (metadata.pauseRequested) --the run, at its next step
             boundary--> job and reply `paused`, the run waiting for chat/resume
    resume:  job `processing`, reply `streaming`, the instruction in metadata.instruction
             --chat/resume--> the run writes the instruction into the thread and goes on
    timeout: a job still `paused` after PAUSE_TIMEOUT_S ends `canceled`

A paused job keeps its chat's slot (migration 0015). The user's requests check the chat under
RLS; the job writes are the service's, as the Data API roles cannot write jobs. The database is
the truth and the event only a signal, as for approvals: a run whose wait ends without the
event finds the job resumed all the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg.types.json import Jsonb

from infra import telemetry
from infra.db import Conn, Pool
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.chats import require_chat
from infra.store.ids import ChatId, MessageId
from infra.store.job_metadata import JobMetadata
from infra.store.statuses import RUNNING_STATUSES, WRITING_REPLY_STATUSES, with_statuses

REQUEST_SQL = with_statuses(
    """
update public.job_runs
set metadata = metadata || '{{"pauseRequested": true}}'::jsonb
where chat_id = %s and assistant_id = %s and status in ({running})
returning root_message_id
""",
    running=RUNNING_STATUSES,
)
REQUESTED_SQL = """
select coalesce((metadata ->> 'pauseRequested')::boolean, false) as requested
from public.job_runs where idempotency_key = %s
"""
# Only the run that holds the job running pauses it (the caller passed `hold` first). The
# deadline it keeps is what a run reads when one of its waits ends without the resume.
PAUSE_SQL = """
update public.job_runs
set status = 'paused', updated_at = now(),
    metadata = (metadata - 'pauseRequested')
      || jsonb_build_object('pausedUntil', now() + make_interval(secs => %s))
where idempotency_key = %s and run_id = %s and status = 'processing'
  and coalesce((metadata ->> 'pauseRequested')::boolean, false)
returning root_message_id
"""
PAUSE_REPLY_SQL = with_statuses(
    """
update public.message set status = 'paused', updated_at = now()
where id = %s and status in ({writing})
""",
    writing=WRITING_REPLY_STATUSES,
)
RESUME_SQL = """
update public.job_runs
set status = 'processing', updated_at = now(), metadata = (metadata - 'pausedUntil') || %s
where chat_id = %s and assistant_id = %s and status = 'paused'
returning root_message_id
"""
RESUME_REPLY_SQL = """
update public.message set status = 'streaming', updated_at = now()
where id = %s and status = 'paused'
"""
# Whether the run's pause goes on: still paused, before its deadline (a job paused before the
# deadline was kept has the one its updated_at gives: nothing writes a paused job).
STILL_PAUSED_SQL = """
select 1 from public.job_runs
where idempotency_key = %s and run_id = %s and status = 'paused'
  and coalesce((metadata ->> 'pausedUntil')::timestamptz,
               updated_at + make_interval(secs => %s)) > now()
"""
STATE_SQL = """
select status, metadata ->> 'instruction' as instruction from public.job_runs
where idempotency_key = %s
"""
EXPIRE_SQL = """
update public.job_runs set status = 'canceled', updated_at = now()
where idempotency_key = %s and status = 'paused'
returning root_message_id, kind, extract(epoch from now() - created_at)::float8 as seconds
"""


class NothingToPause(RuntimeError):
    """No job of this chat and assistant is queued or running."""


class NotPaused(RuntimeError):
    """No job of this chat and assistant is paused."""


@dataclass(frozen=True)
class Resumed:
    """How a paused job's wait ended: resumed (with the instruction, if any), or not."""

    resumed: bool
    instruction: str | None = None
    # Not resumed in time: the job ended `canceled`, and this reply ends with it.
    canceled: MessageId | None = None


async def request_pause(
    pool: Pool, claims: Claims, *, chat_id: ChatId, assistant_id: str
) -> MessageId | None:
    """Ask the chat's active job to pause at its next step boundary; its reply's id.

    ChatNotFound unless the chat is the caller's; NothingToPause when no job is active."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        await act_as_service(conn)
        row = await (await conn.execute(REQUEST_SQL, (chat_id, assistant_id))).fetchone()
        if row is None:
            raise NothingToPause(chat_id)
    reply_id: MessageId | None = row["root_message_id"]
    return reply_id


async def resume(
    pool: Pool,
    claims: Claims,
    *,
    chat_id: ChatId,
    assistant_id: str,
    instruction: str | None,
) -> MessageId:
    """The chat's paused job runs again, with `instruction` for the rest of its turn; its
    reply's id. ChatNotFound unless the chat is the caller's; NotPaused when none is paused."""
    extra: JobMetadata = {"instruction": instruction} if instruction else {}
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        await act_as_service(conn)
        params = (Jsonb(extra), chat_id, assistant_id)
        row = await (await conn.execute(RESUME_SQL, params)).fetchone()
        if row is None:
            raise NotPaused(chat_id)
        await conn.execute(RESUME_REPLY_SQL, (row["root_message_id"],))
    return MessageId(row["root_message_id"])


async def pause_requested(conn: Conn, job_key: str) -> bool:
    row = await (await conn.execute(REQUESTED_SQL, (job_key,))).fetchone()
    return bool(row and row["requested"])


async def pause(conn: Conn, job_key: str, run_id: str, timeout_s: float) -> bool:
    """Job and reply `paused` for at most `timeout_s`, if a pause was asked for and `run_id`
    holds the job."""
    row = await (await conn.execute(PAUSE_SQL, (timeout_s, job_key, run_id))).fetchone()
    if row is None:
        return False
    if row["root_message_id"] is not None:
        await conn.execute(PAUSE_REPLY_SQL, (row["root_message_id"],))
    return True


async def still_paused(conn: Conn, job_key: str, run_id: str, timeout_s: float) -> bool:
    """Whether `run_id`'s pause of the job goes on: not resumed, ended or past its time."""
    params = (job_key, run_id, timeout_s)
    return await (await conn.execute(STILL_PAUSED_SQL, params)).fetchone() is not None


async def settle(conn: Conn, job_key: str) -> Resumed:
    """After the wait: resumed, with its instruction; or, still paused, the job ends
    `canceled` and the chat is free (the caller ends its reply: turns/endings.py)."""
    row = await (await conn.execute(STATE_SQL, (job_key,))).fetchone()
    if row is not None and row["status"] == "processing":
        return Resumed(resumed=True, instruction=row["instruction"])
    expired = await (await conn.execute(EXPIRE_SQL, (job_key,))).fetchone()
    if expired is None:
        return Resumed(resumed=False)
    telemetry.turn_ended("canceled", quick=expired["kind"] == "quick", seconds=expired["seconds"])
    return Resumed(resumed=False, canceled=expired["root_message_id"])
