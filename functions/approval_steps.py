"""The steps of a tool call that waits for the user's approval (see infra/approvals.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import inngest

from infra import approvals
from infra.approvals import Decision
from infra.chat_store import MessageId
from infra.events import APPROVAL_EVENT
from infra.job_control import hold_job
from infra.runtime import Services

# A tool call id goes into the wait's expression as a literal: nothing may escape it.
SAFE_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


async def await_decision(
    ctx: inngest.Context,
    services: Services,
    *,
    job_key: str,
    message_id: MessageId,
    call: dict[str, Any],
) -> Decision | None:
    """Ask, wait for chat/tool_approval or the timeout, and settle: the decision to act on.

    None when the job is no longer this run's (canceled while the question was open).
    """
    timeout_s = services.settings.approval_timeout_s

    async def ask() -> bool | None:
        """True: wait for the user. False: decided already (a replay). None: job gone."""
        expires = datetime.now(UTC) + timedelta(seconds=timeout_s)
        pending = {
            "toolCallId": call["id"],
            "name": call["name"],
            "args": call["args"],
            "expiresAt": expires.isoformat(),
        }
        async with (await services.pool()).connection() as conn, conn.transaction():
            if not await hold_job(conn, job_key, ctx.run_id):
                return None
            return await approvals.ask(conn, message_id, pending)

    async def settle() -> Decision | None:
        """The user's decision, or a timeout if there is none."""
        timed_out = Decision(approved=False, note=None, timed_out=True)
        async with (await services.pool()).connection() as conn, conn.transaction():
            if not await hold_job(conn, job_key, ctx.run_id):
                return None
            return await approvals.settle(conn, message_id, call["id"], timed_out)

    if not SAFE_CALL_ID.fullmatch(call["id"]):
        raise inngest.NonRetriableError(f"tool call id {call['id']!r} cannot be matched")
    asked = await ctx.step.run(f"ask-approval-{call['id']}", ask)
    if asked is None:
        return None
    if asked:
        await ctx.step.wait_for_event(
            f"approval-{call['id']}",
            event=APPROVAL_EVENT,
            if_exp=(
                f"async.data.messageId == '{message_id}' && async.data.toolCallId == '{call['id']}'"
            ),
            timeout=timedelta(seconds=timeout_s),
        )
    return await ctx.step.run(f"settle-approval-{call['id']}", settle)


def declined_text(call: dict[str, Any], decision: Decision) -> str:
    """What the model reads for a call that did not run because of the user's answer."""
    if decision["timed_out"]:
        return f"No answer from the user in time, so {call['name']} was not run."
    note = f" Their note: {decision['note']}" if decision["note"] else ""
    return f"The user rejected this call, so {call['name']} was not run.{note}"
