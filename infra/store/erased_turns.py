"""Turns whose job was deleted while it ran, with its chat or its reply (migration 0019).

The database remembers each one in `handoff.erased_turn` as the job's row goes, whoever deleted
it and however. Until its run stops (it finds its job gone at its next step, or a quick path at
its next lease renewal, and calls `end`), or for a lease at most (a run that died never
calls it), the active-turn limit counts it (infra/store/admission.py), and what its model used
is recorded against its reply all the same (infra/store/usage.py): deleting a reply or a chat
frees nothing that the turn still holds.
"""

from __future__ import annotations

from infra.db import Conn
from infra.store.ids import UserId

# Only the run that stops says so: a run that lost its job for another reason finds no row.
END_SQL = "delete from handoff.erased_turn where job_key = %s returning job_key"
EXISTS_SQL = "select 1 from handoff.erased_turn where job_key = %s"
# A run that died never ends its row: a quick path's counts for its lease (a live one renews it
# more often and finds its job gone within it), a background run's for the background's.
RUNNING_SQL = """
select count(*) as running from handoff.erased_turn
where user_id = %(user_id)s
  and erased_at > now() - make_interval(
    secs => case when kind = 'quick' then %(lease_s)s else %(job_lease_s)s end)
"""


async def running(conn: Conn, user_id: UserId, *, lease_s: float, job_lease_s: float) -> int:
    """How many of the user's turns run on though their job was deleted, as the service."""
    params = {"user_id": user_id, "lease_s": lease_s, "job_lease_s": job_lease_s}
    row = await (await conn.execute(RUNNING_SQL, params)).fetchone()
    return int(row["running"]) if row is not None else 0


async def is_erased(conn: Conn, job_key: str) -> bool:
    """Whether the job was deleted while it ran and its run has not stopped yet."""
    return await (await conn.execute(EXISTS_SQL, (job_key,))).fetchone() is not None


async def end(conn: Conn, job_key: str) -> bool:
    """The deleted job's run stopped: the limit no longer counts it. False when the job was not
    deleted (or another attempt ended it first)."""
    return await (await conn.execute(END_SQL, (job_key,))).fetchone() is not None
