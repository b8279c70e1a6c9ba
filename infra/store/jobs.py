"""The `job_runs` state machine: one chat slot per assistant, the fence, leases, promotion.

Kinds: `quick` (a turn on its respond handler), `handoff` (that turn continuing in the
background), `turn` (a message enqueued behind another job; the background runs it whole).

    quick:   processing --hand_off--> queued (kind handoff) ;  --complete_quick--> completed
    handoff, turn:  queued --claim--> processing --complete--> completed
    turn (a further assistant a message addresses, its slot free): --queue_turn--> queued
    waiting --(the job ahead ends; trigger, migration 0007)--> queued
    queued | processing --cancel--> canceled ;  --fail--> error --claim (a replay)--> processing
    handoff, turn:  processing --release (its run is known to be gone)--> queued
    handoff, turn:  processing --pause (asked for; at a step boundary)--> paused
                    paused --resume--> processing ;  --cancel, or no resume in time--> canceled

The rules:

- **One active job per chat and assistant**: a partial unique index over `queued`,
  `processing` and `paused` (`SLOT_STATUSES`, infra/store/statuses.py) is the slot. A turn
  takes it with its user's message (infra/store/slots.py), so two messages sent together are
  ordered by the database; `waiting` jobs hold no slot.
- **Promotion**: when a job leaves the slot, a deferred trigger makes the oldest `waiting` turn
  of that chat `queued`; its event goes out through the outbox (infra/store/outbox.py).
- **The fence**: every write of a run that matters happens in a transaction that first passes
  `hold` (or a guarded transition below): only the run that holds a live job passes, and a
  cancel, which locks the same row, waits for that transaction. Nothing lands after a cancel.
- **Leases**: `hold` is the heartbeat. A `quick` job silent for `TURN_LEASE_S` is taken for
  dead (`expire_dead_quick`) and its reply, there from the start, ends interrupted; a background
  run silent for `JOB_LEASE_S` may be taken over by another run's claim, which is harmless
  because tool results are stored once per call.
- **Ends are final**: only a live job completes, fails or is canceled; a late report (another
  run's, a retry after a replay succeeded) changes nothing. A failed job may be claimed again:
  a dashboard replay resumes it.
- **Release**: a job whose run died with its executor (`handoff dev` knows it of every
  unfinished job when it starts alone on its database) is claimed anew without the lease.
- `error` holds a code and plain words only, never a traceback: the chat's owner can read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from infra import telemetry
from infra.db import Conn, Pool
from infra.events import TurnPayload
from infra.store.ids import ChatId, MessageId
from infra.store.statuses import RUNNING_STATUSES, SLOT_STATUSES, with_statuses

JobKind = Literal["quick", "handoff", "turn"]

# A quick path that died (its process killed mid-stream) must not hold the slot for good: its
# job ends in `error`, its reply with it (turns/endings.py). With no chat given, every chat's:
# the outbox relay's sweep, so a turn waiting behind a dead one goes without another message.
EXPIRE_QUICK_SQL = """
update public.job_runs set status = 'error', error = 'quick_path_stopped', updated_at = now()
where kind = 'quick' and status = 'processing'
  and (%(chat_id)s::uuid is null or (chat_id = %(chat_id)s and assistant_id = %(assistant_id)s))
  and updated_at < now() - make_interval(secs => %(lease_s)s)
returning root_message_id
"""
# The turn's quick job becomes its background job: the event (id = the key) goes out next.
# Both only while the turn still holds its slot (the cancel of another request may have ended
# it): the caller rolls its transaction back when they change nothing.
HAND_OFF_SQL = """
update public.job_runs
set status = 'queued', kind = 'handoff', root_message_id = %s, payload = %s, updated_at = now()
where idempotency_key = %s and run_id = %s and status = 'processing' and kind = 'quick'
returning id
"""
COMPLETE_QUICK_SQL = """
update public.job_runs set status = 'completed', updated_at = now()
where idempotency_key = %s and run_id = %s and status = 'processing' and kind = 'quick'
returning id
"""
# A run may take a queued job, a failed one (a dashboard replay resumes it), one it already
# holds (its own retry after the claim committed but the step's result was lost), or one whose
# run has shown no sign of life for the lease (a run that died without reaching on_failure would
# otherwise block its chat for good). Taking over a live run is harmless: tool results are
# stored once per call and model rounds apply them by call id. A claim proves the event arrived,
# so it also takes the job out of the outbox.
CLAIM_SQL = """
update public.job_runs
set status = 'processing', run_id = %(run_id)s, attempt = attempt + 1, error = null,
    event_sent_at = coalesce(event_sent_at, now()), updated_at = now()
where idempotency_key = %(key)s and kind <> 'quick'
  and (status in ('queued', 'error')
       or (status = 'processing'
           and (run_id = %(run_id)s or updated_at < now() - make_interval(secs => %(lease_s)s))))
returning id as job_id, root_message_id as reply_id, payload, attempt
"""
# Only a job still running completes (a canceled one keeps its text), with its figures for
# operators: how many tool calls its turn made, and how long since the request that started it.
COMPLETE_SQL = """
update public.job_runs
set status = 'completed', error = null, updated_at = now(),
    metadata = metadata || jsonb_build_object(
      'toolCalls', %s::int,
      'durationMs', round(extract(epoch from now() - created_at) * 1000))
where idempotency_key = %s and status = 'processing'
returning id, kind, extract(epoch from now() - created_at)::float8 as seconds
"""
# Only a live job can fail: a late report (another run's, one after a replay succeeded, the
# failure handler after the function already failed the job itself) must not undo its end.
FAIL_SQL = with_statuses(
    """
update public.job_runs set status = 'error', error = %s, updated_at = now()
where idempotency_key = %s and status in ({slot})
returning root_message_id, kind, extract(epoch from now() - created_at)::float8 as seconds
""",
    slot=SLOT_STATUSES,
)
CANCEL_SQL = with_statuses(
    """
update public.job_runs set status = 'canceled', updated_at = now()
where chat_id = %s and assistant_id = %s and status in ({slot})
returning idempotency_key, root_message_id, kind,
          extract(epoch from now() - created_at)::float8 as seconds
""",
    slot=SLOT_STATUSES,
)
# The update is the heartbeat too: a run that keeps writing keeps its lease.
HOLD_SQL = """
update public.job_runs set updated_at = now()
where idempotency_key = %s and status = 'processing' and run_id = %s
returning id
"""
# How often the job's model rounds ran again (a failed attempt, a lost step output): each may
# have paid the provider again.
RERUN_SQL = """
update public.job_runs
set metadata = metadata || jsonb_build_object(
  'roundReruns', coalesce((metadata ->> 'roundReruns')::int, 0) + 1)
where idempotency_key = %s
"""
RELEASE_SQL = with_statuses(
    """
update public.job_runs set status = 'queued', updated_at = now()
where kind <> 'quick' and status in ({running})
returning idempotency_key, payload
""",
    running=RUNNING_STATUSES,
)


class JobAlreadyActive(RuntimeError):
    """A background job is already queued or running for this chat and assistant."""


@dataclass(frozen=True)
class ClaimedJob:
    job_id: UUID
    reply_id: MessageId
    payload: TurnPayload
    attempt: int  # 1 for the job's first claim


@dataclass(frozen=True)
class ReleasedJob:
    idempotency_key: str
    payload: TurnPayload  # the chat/tool_handoff event's data


@dataclass(frozen=True)
class CanceledJob:
    idempotency_key: str
    reply_id: MessageId | None
    # A turn still on its quick path: no background run to stop; the path finds its slot gone.
    quick: bool


async def expire_dead_quick(
    conn: Conn, *, lease_s: float, chat_id: ChatId | None = None, assistant_id: str = ""
) -> list[MessageId | None]:
    """End the quick jobs (of one chat and assistant, or all) silent for `lease_s`; each one's
    reply, for the caller to end in the same transaction."""
    params = {"chat_id": chat_id, "assistant_id": assistant_id, "lease_s": lease_s}
    rows = await (await conn.execute(EXPIRE_QUICK_SQL, params)).fetchall()
    if rows:
        telemetry.turn_ended("interrupted", quick=True, count=len(rows))
    return [r["root_message_id"] for r in rows]


async def hand_off(
    conn: Conn, *, job_key: str, run_id: str, reply_id: MessageId, payload: TurnPayload
) -> bool:
    """The turn's job continues in the background; False when the turn lost its slot."""
    params = (reply_id, Jsonb(payload), job_key, run_id)
    return await (await conn.execute(HAND_OFF_SQL, params)).fetchone() is not None


async def complete_quick(conn: Conn, job_key: str, run_id: str) -> bool:
    """The turn ended on the quick path; False when it lost its slot."""
    if await (await conn.execute(COMPLETE_QUICK_SQL, (job_key, run_id))).fetchone() is None:
        return False
    telemetry.turn_ended("completed", quick=True)
    return True


async def claim(conn: Conn, job_key: str, run_id: str, *, lease_s: float) -> ClaimedJob | None:
    """Take the job for this run; None when it is done, canceled or held by another live run."""
    params = {"key": job_key, "run_id": run_id, "lease_s": lease_s}
    row = await (await conn.execute(CLAIM_SQL, params)).fetchone()
    return ClaimedJob(**row) if row is not None else None


async def release_all(pool: Pool) -> list[ReleasedJob]:
    """Every running background job (queued or processing) back to `queued`, for a fresh run
    of its event to claim. Only when every run of them is known to be gone (the executor that
    ran them stopped): a live run would lose its hold on the job."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(RELEASE_SQL)).fetchall()
    return [ReleasedJob(r["idempotency_key"], r["payload"]) for r in rows]


async def hold(conn: Conn, job_key: str, run_id: str) -> bool:
    """Lock the job for the rest of `conn`'s transaction if `run_id` still holds it running:
    writes made in that transaction land only while the job is live, and a cancel waits for
    them to commit, so they never land after it."""
    return await (await conn.execute(HOLD_SQL, (job_key, run_id))).fetchone() is not None


async def count_rerun(pool: Pool, job_key: str) -> None:
    async with pool.connection() as conn:
        await conn.execute(RERUN_SQL, (job_key,))


async def complete(conn: Conn, job_key: str, *, tool_calls: int) -> bool:
    """The background job `completed`, with its figures; False when it was no longer running
    (canceled, or finished already by a retry)."""
    if (row := await (await conn.execute(COMPLETE_SQL, (tool_calls, job_key))).fetchone()) is None:
        return False
    _count_end(row, "completed")
    return True


async def fail(conn: Conn, job_key: str, error: str) -> MessageId | None:
    """The live job ends in `error`, which holds `error` (a code, no internals); its reply, for
    the caller to end with it. None when the job had ended already (or has no reply)."""
    if (row := await (await conn.execute(FAIL_SQL, (error, job_key))).fetchone()) is None:
        return None
    _count_end(row, "error")
    return MessageId(row["root_message_id"]) if row["root_message_id"] is not None else None


async def cancel(conn: Conn, chat_id: ChatId, assistant_id: str) -> CanceledJob | None:
    """The active job of the chat and assistant ends `canceled`; None when there is none."""
    if (row := await (await conn.execute(CANCEL_SQL, (chat_id, assistant_id))).fetchone()) is None:
        return None
    _count_end(row, "canceled")
    return CanceledJob(row["idempotency_key"], row["root_message_id"], quick=row["kind"] == "quick")


def _count_end(row: DictRow, outcome: str) -> None:
    telemetry.turn_ended(outcome, quick=row["kind"] == "quick", seconds=row["seconds"])
