"""`outbox-relay`: re-send handoff events that were committed but never confirmed sent.

The respond handler commits the job row first and sends the event after; a crash or an Inngest
outage in between leaves the row with `event_sent_at` null. This cron function sends those
events again with the same ids: Inngest drops an id it has already seen, and the job claim
turns any run that still slips through into a no-op. First it ends the quick jobs of turns whose
process died mid-stream, which hands their chats' slots to any turn waiting behind them.
"""

from __future__ import annotations

import logging
from typing import Any

import inngest

from infra.db import Pool
from infra.events import handoff_event, send_cascade
from infra.runtime import Services
from infra.store import cascades, outbox
from turns.start import expire_dead_quick_turns

logger = logging.getLogger(__name__)

FUNCTION_ID = "outbox-relay"
SCHEDULE = "* * * * *"
BATCH = 100


def create_outbox_relay(client: inngest.Inngest, services: Services) -> inngest.Function[Any]:
    settings = services.settings

    async def resend() -> int:
        pool = await services.pool()
        if expired := await expire_dead_quick_turns(pool, lease_s=settings.turn_lease_s):
            logger.warning("ended quick paths that stopped mid-stream", extra={"count": expired})
        await _resend_cascades(pool)
        jobs = await outbox.unsent(pool, older_than_s=settings.outbox_grace_s, limit=BATCH)
        if not jobs:
            return 0
        await client.send([handoff_event(j.idempotency_key, j.payload) for j in jobs])
        await outbox.mark_sent(pool, [j.idempotency_key for j in jobs])
        logger.warning("re-sent unsent handoff events", extra={"count": len(jobs)})
        return len(jobs)

    async def _resend_cascades(pool: Pool) -> None:
        """Edits' cascades whose event is not known sent, again with their own ids."""
        unsent = await cascades.unsent(pool, older_than_s=settings.outbox_grace_s, limit=BATCH)
        for cascade_id, chat_id in unsent:
            await send_cascade(client, chat_id=chat_id, cascade_id=cascade_id)
        if unsent:
            await cascades.mark_sent(pool, [c for c, _ in unsent])
            logger.warning("re-sent unsent cascades", extra={"count": len(unsent)})

    @client.create_function(
        fn_id=FUNCTION_ID,
        trigger=inngest.TriggerCron(cron=SCHEDULE),
        # One relay at a time: two would only send the same ids twice.
        concurrency=[inngest.Concurrency(limit=1)],
        retries=2,
    )
    async def outbox_relay(ctx: inngest.Context) -> dict[str, int]:
        return {"resent": await ctx.step.run("resend", resend)}

    return outbox_relay
