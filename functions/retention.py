"""`prune-threads`: every day, delete what no thread can still need, once older than
RETENTION_DAYS (infra/store/retention.py); with the setting unset, nothing."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import inngest

from infra.runtime import Services
from infra.store import retention

logger = logging.getLogger(__name__)

FUNCTION_ID = "prune-threads"
SCHEDULE = "17 3 * * *"


async def prune_threads(services: Services) -> dict[str, int]:
    """Prune what is older than RETENTION_DAYS; the rows deleted, by table."""
    days = services.settings.retention_days
    if days is None:
        return dataclasses.asdict(retention.Pruned())
    before = datetime.now(UTC) - timedelta(days=days)
    async with (await services.pool()).connection() as conn:
        pruned = await retention.prune(conn, before)
    counts = dataclasses.asdict(pruned)
    logger.info("pruned what no thread can still need", extra=counts)
    return counts


def create_retention(client: inngest.Inngest, services: Services) -> inngest.Function[Any]:
    async def prune() -> dict[str, int]:
        return await prune_threads(services)

    @client.create_function(
        fn_id=FUNCTION_ID,
        trigger=inngest.TriggerCron(cron=SCHEDULE),
        concurrency=[inngest.Concurrency(limit=1)],
        retries=2,
    )
    async def prune_threads_fn(ctx: inngest.Context) -> dict[str, int]:
        return await ctx.step.run("prune", prune)

    return prune_threads_fn
