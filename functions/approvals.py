"""The steps of a tool call that waits for the user's approval (infra/store/approvals.py)."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import inngest

from functions.wakes import wait_for_wake
from infra.events import APPROVAL_EVENT
from infra.store.approvals import Decision
from turns.job import HandoffJob

# A tool call id goes into the wait's expression as a literal: nothing may escape it.
SAFE_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


async def await_decision(
    ctx: inngest.Context, job: HandoffJob, call: dict[str, Any]
) -> Decision | None:
    """Ask, wait for chat/tool_approval or the timeout, and settle: the decision to act on.

    None when the job is no longer this run's (canceled while the question was open).
    """
    if not SAFE_CALL_ID.fullmatch(call["id"]):
        raise inngest.NonRetriableError(f"tool call id {call['id']!r} cannot be matched")
    timeout_s = job.services.settings.approval_timeout_s
    asked = await ctx.step.run(f"ask-approval-{call['id']}", job.ask_approval, call, timeout_s)
    if asked is None:
        return None
    if asked:
        await wait_for_wake(
            ctx,
            f"approval-{call['id']}",
            event=APPROVAL_EVENT,
            if_exp=(
                f"async.data.messageId == '{job.turn.reply_id}'"
                f" && async.data.toolCallId == '{call['id']}'"
            ),
            timeout_s=timeout_s,
            settings=job.services.settings,
            still_waiting=partial(job.awaits_approval, call),
        )
    return await ctx.step.run(f"settle-approval-{call['id']}", job.settle_approval, call)
