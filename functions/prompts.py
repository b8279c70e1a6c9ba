"""Waiting for the user: a tool call to approve, a question the model asks, a pause.

Each is one shape, `ask_wait_settle`: a step commits what the job waits for (turns/prompts.py,
turns/job.py), a series of waits for the user's event reads the database whenever one ends
without it (functions/wakes.py), and a step settles what the job goes on with. A `Prompt` says
what differs: the step ids, the event and how it is matched, the timeout, the step bodies.

The step ids are the memo keys of runs in flight: each must stay as it is, byte for byte
(tests/functions/test_step_ids.py replays a run recorded with them).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

import inngest

from functions.wakes import wait_for_wake
from infra.events import ANSWER_EVENT, APPROVAL_EVENT, RESUME_EVENT, EventSender
from infra.settings import Settings
from infra.store.approvals import Decision
from infra.store.tool_results import ToolResult
from turns.job import BackgroundJob
from turns.plan import PlannedCall

T = TypeVar("T")

# A tool call id goes into the wait's expression as a literal: nothing may escape it.
SAFE_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


@dataclass(frozen=True)
class Prompt(Generic[T]):
    """One wait for the user, by its steps: `ask_id` runs `ask` (True: wait; False: nothing to
    wait for, a replay; None: the job is gone), `wait_id` names the waits for `event` matching
    `if_exp` within `timeout_s`, `still_waiting` is read between them, and `settle_id` runs
    `settle`. A prompt with `unasked` set comes to that when `ask` finds nothing to wait for,
    without a settle step."""

    ask_id: str
    wait_id: str
    settle_id: str
    event: str
    if_exp: str
    timeout_s: int
    ask: Callable[[], Awaitable[bool | None]]
    still_waiting: Callable[[], Awaitable[bool]]
    settle: Callable[[], Awaitable[T]]
    unasked: T | None = None


async def ask_wait_settle(ctx: inngest.Context, prompt: Prompt[T], settings: Settings) -> T | None:
    """Ask, wait for the user's event (or the database's word, or the timeout), and settle:
    what the job goes on with. None when the job is no longer this run's."""
    asked = await ctx.step.run(prompt.ask_id, prompt.ask)
    if asked is None:
        return None
    if not asked and prompt.unasked is not None:
        return prompt.unasked
    if asked:
        await wait_for_wake(
            ctx,
            prompt.wait_id,
            event=prompt.event,
            if_exp=prompt.if_exp,
            timeout_s=prompt.timeout_s,
            settings=settings,
            still_waiting=prompt.still_waiting,
        )
    return await ctx.step.run(prompt.settle_id, prompt.settle)


def matching(job: BackgroundJob, field: str, call: PlannedCall) -> str:
    """The wait's expression for the user's reply to `call` on the job's reply."""
    if not SAFE_CALL_ID.fullmatch(call["id"]):
        raise inngest.NonRetriableError(f"tool call id {call['id']!r} cannot be matched")
    return f"async.data.messageId == '{job.turn.reply_id}' && async.data.{field} == '{call['id']}'"


def approval(job: BackgroundJob, call: PlannedCall) -> Prompt[Decision | None]:
    """The call waits for the user's approval (chat/tool_approval): the decision to act on."""
    prompts, timeout_s = job.prompts, job.services.settings.approval_timeout_s
    return Prompt(
        ask_id=f"ask-approval-{call['id']}",
        wait_id=f"approval-{call['id']}",
        settle_id=f"settle-approval-{call['id']}",
        event=APPROVAL_EVENT,
        if_exp=matching(job, "toolCallId", call),
        timeout_s=timeout_s,
        ask=partial(prompts.ask_approval, call, timeout_s),
        still_waiting=partial(prompts.awaits_approval, call),
        settle=partial(prompts.settle_approval, call),
    )


def question(job: BackgroundJob, call: PlannedCall) -> Prompt[ToolResult | None]:
    """The model's question waits for the user's answer (chat/user_answer): the call's
    result, which the answer (or the note that nobody answered) is."""
    prompts, timeout_s = job.prompts, job.services.settings.question_timeout_s
    return Prompt(
        ask_id=f"ask-question-{call['id']}",
        wait_id=f"answer-{call['id']}",
        settle_id=f"settle-question-{call['id']}",
        event=ANSWER_EVENT,
        if_exp=matching(job, "questionId", call),
        timeout_s=timeout_s,
        ask=partial(prompts.ask_question, call, timeout_s),
        still_waiting=partial(prompts.awaits_answer, call),
        settle=partial(prompts.settle_question, call),
    )


def pause(job: BackgroundJob, events: EventSender, n: int) -> Prompt[bool]:
    """The run's `n`th pause waits for chat/resume (or PAUSE_TIMEOUT_S): True once the job may
    go on (at once when no pause is asked for any more), False when it ended meanwhile."""
    return Prompt(
        ask_id=f"pause-{n}",
        wait_id=f"resume-{n}",
        settle_id=f"resumed-{n}",
        event=RESUME_EVENT,
        if_exp=f"async.data.messageId == '{job.turn.reply_id}'",
        timeout_s=job.services.settings.pause_timeout_s,
        ask=job.pause,
        still_waiting=job.awaits_resume,
        settle=partial(job.settle_pause, events),
        unasked=True,
    )
