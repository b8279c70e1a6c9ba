"""The steps of a question the model asks the user (infra/store/questions.py).

The same three steps as an approval (functions/approvals.py): ask, wait for `chat/user_answer`
or the timeout, settle. The settled answer is the call's result.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import inngest

from functions.approvals import SAFE_CALL_ID
from functions.wakes import wait_for_wake
from infra.events import ANSWER_EVENT
from infra.store.tool_results import ToolResult
from turns.job import HandoffJob


async def await_answer(
    ctx: inngest.Context, job: HandoffJob, call: dict[str, Any]
) -> ToolResult | None:
    """Ask, wait for chat/user_answer or the timeout, and settle: the call's result.

    None when the job is no longer this run's (canceled while the question was open).
    """
    if not SAFE_CALL_ID.fullmatch(call["id"]):
        raise inngest.NonRetriableError(f"tool call id {call['id']!r} cannot be matched")
    timeout_s = job.services.settings.question_timeout_s
    asked = await ctx.step.run(f"ask-question-{call['id']}", job.ask_question, call, timeout_s)
    if asked is None:
        return None
    if asked:
        await wait_for_wake(
            ctx,
            f"answer-{call['id']}",
            event=ANSWER_EVENT,
            if_exp=(
                f"async.data.messageId == '{job.turn.reply_id}'"
                f" && async.data.questionId == '{call['id']}'"
            ),
            timeout_s=timeout_s,
            settings=job.services.settings,
            still_waiting=partial(job.awaits_answer, call),
        )
    return await ctx.step.run(f"settle-question-{call['id']}", job.settle_question, call)
