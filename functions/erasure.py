"""`erase-objects`: delete the S3 objects of erased tool results.

Deleting a chat, a message or a user erases its rows in the database at once (migration 0019);
a tool output large enough to live in S3 (infra/large_outputs.py) waits in the erasure queue
(infra/store/erasures.py) for this cron function, which deletes each object and then its entry.
A delete that fails leaves its entry for the next run.
"""

from __future__ import annotations

import logging
from typing import Any

import inngest

from infra.large_outputs import LargeOutputs
from infra.runtime import Services
from infra.store import erasures

logger = logging.getLogger(__name__)

FUNCTION_ID = "erase-objects"
SCHEDULE = "* * * * *"
BATCH = 100


async def erase_objects(services: Services, large_outputs: LargeOutputs) -> int:
    """Delete the objects of the oldest erased tool results; how many went."""
    pool = await services.pool()
    uris = await erasures.pending(pool, BATCH)
    for uri in uris:
        await large_outputs.delete(uri)
    if uris:
        await erasures.deleted(pool, uris)
        logger.info("deleted the objects of erased tool results", extra={"count": len(uris)})
    return len(uris)


def create_erasure(client: inngest.Inngest, services: Services) -> inngest.Function[Any]:
    large_outputs = LargeOutputs(services.settings.large_output_bucket)

    async def erase() -> int:
        return await erase_objects(services, large_outputs)

    @client.create_function(
        fn_id=FUNCTION_ID,
        trigger=inngest.TriggerCron(cron=SCHEDULE),
        concurrency=[inngest.Concurrency(limit=1)],
        retries=2,
    )
    async def erase_objects_fn(ctx: inngest.Context) -> dict[str, int]:
        return {"deleted": await ctx.step.run("erase", erase)}

    return erase_objects_fn
