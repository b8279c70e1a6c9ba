"""Waiting for the user without losing the wake-up.

A job that waits for the user commits what it waits for in one step (the reply
`awaiting_input`, the job `paused`, ...) and begins its `wait_for_event` in the next call, one
round trip to the app later. The routes answer 202 and send the event as soon as the database
shows the state, and Inngest matches an event only to waits that exist when it arrives: an
answer given in that window would match nothing, and the job would sit out its whole timeout.

So the wait is a series of shorter waits with a read of the database between them: whenever a
wait ends without its event, a step asks the database whether the job still waits (the user's
reply recorded, the job resumed or ended, the deadline passed: no longer). The database is the
truth and the event only a signal, so the read is as good as the event; a wake-up lost before a
wait began is acted on when that wait ends. The waits grow (`recheck_schedule`): the first is
short, since the window follows the step that asked, and each next one is longer, so a whole
timeout costs few steps of the run's 1,000.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import inngest

from infra.settings import Settings

# Each wait after the first is this many times as long as the one before (up to the cap).
GROWTH = 4


def recheck_schedule(timeout_s: int, first_s: int, max_s: int) -> list[int]:
    """The lengths, in whole seconds as Inngest counts them, of the waits that together last
    `timeout_s`: `first_s`, then each GROWTH times the one before, at most `max_s`, the last
    cut to what is left."""
    lengths: list[int] = []
    left, length = timeout_s, max(1, first_s)
    while left > 0:
        lengths.append(min(length, max(1, max_s), left))
        left -= lengths[-1]
        length *= GROWTH
    return lengths


async def wait_for_wake(
    ctx: inngest.Context,
    step_id: str,
    *,
    event: str,
    if_exp: str,
    timeout_s: int,
    settings: Settings,
    still_waiting: Callable[[], Awaitable[bool]],
) -> None:
    """Return once the wake-up event came, the database says the wait is over, or `timeout_s`
    has passed; the caller's next step reads what happened.

    The first wait keeps the id `step_id` (the id a single wait had); the next ones are
    `<step_id>-<k>`, each after a step `<step_id>-check-<k>` that runs `still_waiting`."""
    lengths = recheck_schedule(timeout_s, settings.wait_recheck_s, settings.wait_recheck_max_s)
    for k, length in enumerate(lengths):
        woken = await ctx.step.wait_for_event(
            f"{step_id}-{k}" if k else step_id,
            event=event,
            if_exp=if_exp,
            timeout=timedelta(seconds=length),
        )
        if woken is not None or k + 1 == len(lengths):
            return
        if not await ctx.step.run(f"{step_id}-check-{k + 1}", still_waiting):
            return
