"""The S3 objects of erased tool results, waiting to be deleted (migration 0019).

Deleting a chat, a message or a user erases its tool results in the database at once; the
triggers that do it put the address of each large output (infra/large_outputs.py) in
`handoff.erased_object`, and the background deletes the objects (functions/erasure.py). An
address leaves the queue once its object is deleted, so a failed delete is tried again.
"""

from __future__ import annotations

from infra.db import Pool

PENDING_SQL = "select uri from handoff.erased_object order by queued_at limit %s"
DONE_SQL = "delete from handoff.erased_object where uri = any(%s)"


async def pending(pool: Pool, limit: int) -> list[str]:
    """The oldest addresses whose objects are still to delete."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(PENDING_SQL, (limit,))).fetchall()
    return [r["uri"] for r in rows]


async def deleted(pool: Pool, uris: list[str]) -> None:
    """These objects are gone: their addresses leave the queue."""
    async with pool.connection() as conn:
        await conn.execute(DONE_SQL, (uris,))
