"""Lambda SnapStart: what a snapshot must not carry, and what each restored copy renews.

With SnapStart, Lambda initializes a function version once, when it is published, snapshots the
execution environment's memory, and starts every later environment of that version from the
snapshot. Whatever the init made is then shared by all of them: an open database connection
(one server session for many processes, or a dead one), the state of `random`, and the settings
read from SSM when the version was published, which may have been rotated since. Both Lambda
entries run these from their hooks (handlers/snapstart.py, functions/lambda_inngest.py).
"""

from __future__ import annotations

import asyncio
import logging
import random

from infra.runtime import Services
from infra.secrets import load_settings
from infra.settings import Settings

logger = logging.getLogger(__name__)

# How long the warm-up waits for the database, well within the adapter's 60 s for the hook.
WARM_UP_S = 5


async def before_snapshot(services: Services) -> None:
    """Warm what the first request would open, then close it: a connection is made and used
    once (psycopg's connection, TLS and pool code all loaded), and none is left open.

    Best effort: a database that does not answer within WARM_UP_S while the version is
    published costs the first request that warm-up, not the deploy."""
    try:
        async with asyncio.timeout(WARM_UP_S):
            pool = await services.pool()
            async with pool.connection() as conn:
                await conn.execute("select 1")
    except Exception:
        logger.warning("database not warmed before the snapshot", exc_info=True)
    await services.close_connections()


def after_restore(current: Settings) -> Settings | None:
    """Renew what every copy of the snapshot would share: `random` is reseeded from the
    system's entropy, and the settings are read again (from SSM when it is configured); the
    new settings when they differ from `current`, else None."""
    random.seed()
    settings = load_settings()
    if settings == current:
        return None
    logger.info("settings changed since the snapshot")
    return settings
