"""The steps of a pause the user asked for (infra/store/pauses.py): the job stops between two
steps, waits for chat/resume (or PAUSE_TIMEOUT_S), and goes on or ends."""

from __future__ import annotations

from datetime import timedelta

import inngest

from infra.events import RESUME_EVENT
from turns.job import HandoffJob


async def await_resume(
    ctx: inngest.Context, job: HandoffJob, events: inngest.Inngest, n: int
) -> bool:
    """Pause the job (its `n`th pause in this run) and wait: True once it may go on, False when
    it ended meanwhile (canceled, or not resumed in time)."""
    paused = await ctx.step.run(f"pause-{n}", job.pause)
    if paused is None:
        return False
    if paused:
        await ctx.step.wait_for_event(
            f"resume-{n}",
            event=RESUME_EVENT,
            if_exp=f"async.data.messageId == '{job.turn.reply_id}'",
            timeout=timedelta(seconds=job.services.settings.pause_timeout_s),
        )
        return await ctx.step.run(f"resumed-{n}", job.settle_pause, events)
    return True
