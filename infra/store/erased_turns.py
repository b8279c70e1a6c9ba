"""Turns whose job was deleted while it ran, with its chat or its reply (migration 0019).

The database remembers each one in `handoff.erased_turn` as the job's row goes, whoever deleted
it and however. Until its run stops (it finds its job gone at its next step, or a quick path at
its next lease renewal, and calls `end`), or for a lease at most (a run that died never
calls it: a quick path's for `TURN_LEASE_S`, a background run's for `JOB_LEASE_S`), the
active-turn limit counts it (`handoff.start_turn`, infra/store/admission.py), and what its model
used is recorded against its reply all the same (infra/store/usage.py): deleting a reply or a
chat frees nothing that the turn still holds.
"""

from __future__ import annotations

from infra.db import Conn

# Only the run that stops says so: a run that lost its job for another reason finds no row.
END_SQL = "delete from handoff.erased_turn where job_key = %s returning job_key"
EXISTS_SQL = "select 1 from handoff.erased_turn where job_key = %s"


async def is_erased(conn: Conn, job_key: str) -> bool:
    """Whether the job was deleted while it ran and its run has not stopped yet."""
    return await (await conn.execute(EXISTS_SQL, (job_key,))).fetchone() is not None


async def end(conn: Conn, job_key: str) -> bool:
    """The deleted job's run stopped: the limit no longer counts it. False when the job was not
    deleted (or another attempt ended it first)."""
    return await (await conn.execute(END_SQL, (job_key,))).fetchone() is not None
