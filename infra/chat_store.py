"""Rows of `chat`, `message` and `job_runs`.

User-scoped statements run the way PostgREST runs them (`set local role authenticated` with
`request.jwt.claims`), so the database's RLS policies decide what a user may see and write.
Service statements (the background function, the handoff) run as the connecting role.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, NewType
from uuid import UUID

from psycopg.types.json import Jsonb

from infra.db import Conn, Pool

UserId = NewType("UserId", UUID)
ChatId = NewType("ChatId", UUID)
MessageId = NewType("MessageId", UUID)

ReplyStatus = Literal["queued", "completed", "error", "canceled"]

# What PostgREST sets per request, in one statement: the claims, then `set local role`.
# Back to the connecting role for the rest of a transaction that began as the user's.
SERVICE_ROLE_SQL = "select set_config('role', 'none', true)"
# The background job's progress (agent status, tool calls) for subscribers; an ended message
# keeps the snapshot it ended with.
RECORD_SNAPSHOT_SQL = """
update public.message
set metadata = metadata || jsonb_build_object('snapshot', %s::jsonb), updated_at = now()
where id = %s and status in ('queued', 'streaming', 'awaiting_approval')
"""
SET_REQUEST_SQL = """
select set_config('request.jwt.claims', %s, true), set_config('role', 'authenticated', true)
"""

CHAT_VISIBLE_SQL = "select id from public.chat where id = %s"
INSERT_ASSISTANT_MESSAGE_SQL = """
insert into public.message
  (id, chat_id, assistant_id, role, content, status, parent_message_id, metadata, handoff_event_id)
values (%s, %s, %s, 'assistant', %s, %s, %s, %s, %s)
"""
# The turn's quick job becomes its background job: the event (id = the key) goes out next.
# Both only while the turn still holds its slot (the cancel of another request may have ended
# it): the caller rolls its transaction back when they change nothing.
HAND_OFF_JOB_SQL = """
update public.job_runs
set status = 'queued', kind = 'handoff', root_message_id = %s, payload = %s, updated_at = now()
where idempotency_key = %s and run_id = %s and status = 'processing' and kind = 'quick'
returning id
"""
COMPLETE_QUICK_JOB_SQL = """
update public.job_runs set status = 'completed', updated_at = now()
where idempotency_key = %s and run_id = %s and status = 'processing' and kind = 'quick'
returning id
"""
MARK_EVENT_SENT_SQL = """
update public.job_runs set event_sent_at = now(), updated_at = now()
where idempotency_key = any(%s) and event_sent_at is null
"""
# Younger rows are left to the request that created them, which sends right after its commit.
UNSENT_JOBS_SQL = """
select idempotency_key, payload from public.job_runs
where event_sent_at is null and status = 'queued'
  and created_at < now() - make_interval(secs => %(older_than_s)s)
order by created_at
limit %(limit)s
"""
# A run may take a queued job, a failed one (a dashboard replay resumes it), one it already
# holds (its own retry after the claim committed but the step's result was lost), or one whose
# run has shown no sign of life for the lease (a run that died without reaching on_failure would
# otherwise block its chat for good). Taking over a live run is harmless: tool results are
# stored once per call and model rounds apply them by call id. A claim proves the event arrived,
# so it also takes the job out of the outbox.
CLAIM_JOB_SQL = """
update public.job_runs
set status = 'processing', run_id = %(run_id)s, attempt = attempt + 1, error = null,
    event_sent_at = coalesce(event_sent_at, now()), updated_at = now()
where idempotency_key = %(key)s and kind <> 'quick'
  and (status in ('queued', 'error')
       or (status = 'processing'
           and (run_id = %(run_id)s or updated_at < now() - make_interval(secs => %(lease_s)s))))
returning id, chat_id, assistant_id, root_message_id, payload
"""
MESSAGE_STREAMING_SQL = """
update public.message set status = 'streaming', updated_at = now()
where id = %s and status in ('queued', 'error', 'streaming')
"""
# The reply's checkpoint is the thread's head once the job ends (infra/branches.py).
FINALIZE_MESSAGE_SQL = """
update public.message
set content = %s, status = 'completed', updated_at = now(),
    metadata = metadata || jsonb_build_object('checkpointId', %s::text)
where id = %s
"""
FAIL_MESSAGE_SQL = """
update public.message set content = %s, status = 'error', updated_at = now()
where id = %s and status <> 'completed'
"""
DELETE_DRAFT_SQL = "delete from public.message_draft where message_id = %s"
# Only a job still running completes: a canceled one keeps the text it had when canceled.
COMPLETE_JOB_SQL = """
update public.job_runs set status = 'completed', error = null, updated_at = now()
where idempotency_key = %s and status = 'processing'
returning id
"""
# Only a live job can fail: a late report (another run's, one after a replay succeeded, the
# failure handler after the function already failed the job itself) must not undo its end.
FAIL_JOB_SQL = """
update public.job_runs set status = 'error', error = %s, updated_at = now()
where idempotency_key = %s and status in ('queued', 'processing')
returning root_message_id
"""


class ChatNotFound(LookupError):
    """The chat does not exist or is not the user's."""


class JobAlreadyActive(RuntimeError):
    """A background job is already queued or running for this chat and assistant."""


class DuplicateMessage(RuntimeError):
    """A message with this id already exists."""


@dataclass(frozen=True)
class JobClaim:
    job_id: UUID
    chat_id: ChatId
    assistant_id: str
    root_message_id: MessageId
    payload: dict[str, Any]


@asynccontextmanager
async def user_transaction(pool: Pool, claims: dict[str, Any]) -> AsyncIterator[Conn]:
    """A transaction in which RLS sees the request's JWT claims, as PostgREST sets them."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(SET_REQUEST_SQL, (json.dumps(claims),))
        yield conn


async def insert_assistant_message(
    conn: Conn,
    *,
    message_id: MessageId,
    chat_id: ChatId,
    assistant_id: str,
    content: str,
    status: ReplyStatus,
    parent_id: MessageId,
    metadata: dict[str, Any],
    handoff_event_id: str | None = None,
) -> None:
    await conn.execute(
        INSERT_ASSISTANT_MESSAGE_SQL,
        (
            message_id,
            chat_id,
            assistant_id,
            content,
            status,
            parent_id,
            Jsonb(metadata),
            handoff_event_id,
        ),
    )


async def record_snapshot(conn: Conn, message_id: MessageId, snapshot: dict[str, Any]) -> None:
    await conn.execute(RECORD_SNAPSHOT_SQL, (Jsonb(snapshot), message_id))


async def hand_off_job(
    conn: Conn,
    *,
    idempotency_key: str,
    run_id: str,
    root_message_id: MessageId,
    payload: dict[str, Any],
) -> bool:
    """The turn's job continues in the background; False when the turn lost its slot."""
    params = (root_message_id, Jsonb(payload), idempotency_key, run_id)
    return await (await conn.execute(HAND_OFF_JOB_SQL, params)).fetchone() is not None


async def complete_quick_job(conn: Conn, idempotency_key: str, run_id: str) -> bool:
    """The turn ended on the quick path; False when it lost its slot."""
    params = (idempotency_key, run_id)
    return await (await conn.execute(COMPLETE_QUICK_JOB_SQL, params)).fetchone() is not None


async def mark_events_sent(pool: Pool, idempotency_keys: list[str]) -> None:
    async with pool.connection() as conn:
        await conn.execute(MARK_EVENT_SENT_SQL, (idempotency_keys,))


@dataclass(frozen=True)
class UnsentJob:
    idempotency_key: str
    payload: dict[str, Any]


async def unsent_jobs(pool: Pool, *, older_than_s: float, limit: int) -> list[UnsentJob]:
    """Queued jobs whose event was never confirmed sent, oldest first."""
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(UNSENT_JOBS_SQL, {"older_than_s": older_than_s, "limit": limit})
        ).fetchall()
    return [UnsentJob(r["idempotency_key"], r["payload"]) for r in rows]


UNSENT_JOBS_OF_CHAT_SQL = """
select idempotency_key, payload from public.job_runs
where chat_id = %s and assistant_id = %s and status = 'queued' and event_sent_at is null
  and kind = 'turn'
"""


async def unsent_jobs_of(pool: Pool, chat_id: ChatId, assistant_id: str) -> list[UnsentJob]:
    """The chat's turns that waited, took the slot when the job ahead ended, and were not sent."""
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(UNSENT_JOBS_OF_CHAT_SQL, (chat_id, assistant_id))
        ).fetchall()
    return [UnsentJob(r["idempotency_key"], r["payload"]) for r in rows]


async def claim_job(
    pool: Pool, idempotency_key: str, run_id: str, *, lease_s: float
) -> JobClaim | None:
    """Take the job for this run; None when it is done, canceled or held by another live run."""
    params = {"key": idempotency_key, "run_id": run_id, "lease_s": lease_s}
    async with pool.connection() as conn, conn.transaction():
        row = await (await conn.execute(CLAIM_JOB_SQL, params)).fetchone()
        if row is None:
            return None
        await conn.execute(MESSAGE_STREAMING_SQL, (row["root_message_id"],))
    return JobClaim(
        job_id=row["id"],
        chat_id=ChatId(row["chat_id"]),
        assistant_id=row["assistant_id"],
        root_message_id=MessageId(row["root_message_id"]),
        payload=row["payload"],
    )


async def finalize_job(
    pool: Pool,
    *,
    idempotency_key: str,
    message_id: MessageId,
    content: str,
    checkpoint_id: str | None,
) -> None:
    """Final content, `completed`, draft gone and job `completed`, all or nothing; nothing at
    all when the job is no longer running (canceled, or already finalized by a retry)."""
    async with pool.connection() as conn, conn.transaction():
        if await (await conn.execute(COMPLETE_JOB_SQL, (idempotency_key,))).fetchone() is None:
            return
        await conn.execute(FINALIZE_MESSAGE_SQL, (content, checkpoint_id, message_id))
        await conn.execute(DELETE_DRAFT_SQL, (message_id,))


async def fail_job(pool: Pool, *, idempotency_key: str, user_text: str, error: str) -> bool:
    """The user sees `user_text`; the details stay in job_runs.error. False if already done."""
    async with pool.connection() as conn, conn.transaction():
        row = await (await conn.execute(FAIL_JOB_SQL, (error, idempotency_key))).fetchone()
        if row is None:
            return False
        await conn.execute(FAIL_MESSAGE_SQL, (user_text, row["root_message_id"]))
        await conn.execute(DELETE_DRAFT_SQL, (row["root_message_id"],))
    return True


ENSURE_USER_SQL = """
insert into auth.users (id, email) values (%s, %s) on conflict (id) do nothing
"""
CREATE_CHAT_SQL = """
insert into public.chat (id, user_id, title) values (%s, %s, %s)
on conflict (id) do nothing
"""


async def ensure_user(conn: Conn, user_id: UserId, email: str) -> None:
    """Service write for seeding; on Supabase, auth owns this table."""
    await conn.execute(ENSURE_USER_SQL, (user_id, email))


async def create_chat(conn: Conn, chat_id: ChatId, user_id: UserId, title: str) -> None:
    await conn.execute(CREATE_CHAT_SQL, (chat_id, user_id, title))
