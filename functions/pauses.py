"""The steps of a pause the user asked for (infra/store/pauses.py): the job stops between two
steps, waits for chat/resume (or PAUSE_TIMEOUT_S; functions/wakes.py), and goes on or ends."""

from __future__ import annotations

import inngest

from functions.wakes import wait_for_wake
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
        await wait_for_wake(
            ctx,
            f"resume-{n}",
            event=RESUME_EVENT,
            if_exp=f"async.data.messageId == '{job.turn.reply_id}'",
            timeout_s=job.services.settings.pause_timeout_s,
            settings=job.services.settings,
            still_waiting=job.awaits_resume,
        )
        return await ctx.step.run(f"resumed-{n}", job.settle_pause, events)
    return True
