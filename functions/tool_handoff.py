"""`tool-handoff`: a turn's background job, run as steps. Its name and its event's
(`chat/tool_handoff`) are those of its first use and stay, since runs in flight carry them: the
job either resumes a turn the quick path handed off, from its durable checkpoint, or runs a whole
turn that waited in the queue behind another (the turn's `kind`); either way it runs tools as
steps and finalizes.

Inngest re-runs this handler from the top for every step and hands back memoized step outputs,
so everything outside `step.run` is deterministic and free of side effects: the plan of what to
do next is itself a step output, never a fresh database read, and `turns.course.next_step`
decides it from those outputs alone. The step bodies are the methods of a `BackgroundJob`
(turns/job.py) and its units; the waits for the user are functions/prompts.py's. This module
only runs what the course says, in Inngest's terms.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any, Literal, NotRequired, ParamSpec, TypedDict, TypeVar

import inngest
from pydantic import ValidationError

from agent.assistants import Assistants
from functions import prompts
from functions.prompts import ask_wait_settle
from infra import telemetry
from infra.events import CANCEL_EVENT, HANDOFF_EVENT
from infra.large_outputs import LargeOutputs
from infra.runtime import Services
from infra.settings import Settings
from infra.store.approvals import Decision
from infra.store.tool_results import ToolResult
from turns import course
from turns.failures import JobFailed, RetryLater
from turns.job import BackgroundJob, fail_job
from turns.plan import Plan
from turns.turn import Turn

logger = logging.getLogger(__name__)

FUNCTION_ID = "tool-handoff"
RETRIES = 4

P = ParamSpec("P")
R = TypeVar("R")


class RunOutcome(TypedDict):
    """The function's output: how the run ended, and the model rounds it ran."""

    status: Literal["skipped", "stopped", "completed"]
    rounds: NotRequired[int]


def create_tool_handoff(
    client: inngest.Inngest, services: Services, assistants: Assistants
) -> inngest.Function[Any]:
    large_outputs = LargeOutputs(services.settings.large_output_bucket)

    async def on_failure(ctx: inngest.Context) -> None:
        original = ctx.event.data.get("event")
        if not isinstance(original, dict) or not isinstance(original.get("id"), str):
            logger.error("failure event without the original event id")
            return
        logger.error(
            "tool handoff failed",
            extra={"job_id": original["id"], "error": str(ctx.event.data.get("error"))},
        )
        await fail_job(services, client, assistants, original["id"], original.get("data"))

    @client.create_function(
        fn_id=FUNCTION_ID,
        trigger=inngest.TriggerEvent(event=HANDOFF_EVENT),
        # Limits concurrent steps per chat, not runs: the job_runs claim keeps a job single.
        concurrency=[inngest.Concurrency(limit=1, key="event.data.chatId")],
        # POST /api/chat/{chatId}/cancel has already ended the job in the database; this stops
        # the run at its next step instead of letting it find out at its next write.
        cancel=[
            inngest.Cancel(
                event=CANCEL_EVENT, if_exp="event.data.rootMessageId == async.data.messageId"
            )
        ],
        retries=RETRIES,
        on_failure=on_failure,
    )
    async def tool_handoff(ctx: inngest.Context) -> RunOutcome:
        try:
            turn = Turn.model_validate(ctx.event.data)
        except ValidationError as exc:
            raise inngest.NonRetriableError("invalid chat/tool_handoff payload") from exc
        if not ctx.event.id:
            raise inngest.NonRetriableError("chat/tool_handoff needs an event id")
        assistant = assistants.get(turn.assistant_id)
        if assistant is None:
            # Its turn began with an assistant since removed from ASSISTANTS: nothing can run
            # it, and the failure handler ends its reply saying so.
            raise inngest.NonRetriableError(f"no assistant {turn.assistant_id!r} in ASSISTANTS")
        job = BackgroundJob(
            services=services,
            assistant=assistant,
            job_key=ctx.event.id,
            run_id=ctx.run_id,
            turn=turn,
            large_outputs=large_outputs,
        )
        return await run_steps(ctx, job, client)

    return tool_handoff


async def run_steps(
    ctx: inngest.Context, job: BackgroundJob, events: inngest.Inngest
) -> RunOutcome:
    """Claim, then run what `turns.course.next_step` says until the job ends or stops."""
    claim = await ctx.step.run("claim", _step_body(job.claim, job, "claim", ctx.attempt))
    if not claim["claimed"]:
        logger.info("job already taken or finished; nothing to do", extra=job.log)
        return {"status": "skipped"}
    # From here on the job row, written by the request that handed off or enqueued the turn,
    # says which thread, message and model this is: the event only names the job.
    job = job.claimed(claim)
    run = _Run(ctx, job, events)
    limits = course.Limits.of(job.services.settings)
    at = course.Course(plan=Plan.from_json(claim))
    kind_of = job.prompts.kind_of
    results: list[ToolResult] = []
    while True:
        kinds = {c["id"]: kind_of(c) for c in at.plan.pending}
        step = course.next_step(at, kinds, limits)
        if isinstance(step, course.Stop):
            logger.info("job canceled or taken over; stopping", extra=job.log)
            return {"status": "stopped", "rounds": at.rounds}
        if isinstance(step, course.Finalize):
            if await run.finalize(step):
                return {"status": "completed", "rounds": at.rounds}
            # A message steered into the job came after its last round: one more answers it.
            at = course.finalized(at)
        elif isinstance(step, course.Pause):
            if not await ask_wait_settle(ctx, prompts.pause(job, events, step.n), run.settings):
                logger.info("job ended while paused", extra=job.log)
                return {"status": "stopped", "rounds": at.rounds}
            at = course.resumed(at, step)
        elif isinstance(step, course.Opening):
            at = course.opened(at, await run.opening(step))
        else:
            if isinstance(step, course.ToolRound):
                answered = await run.answer(step)
                if answered is None:
                    logger.info("job canceled while waiting for the user", extra=job.log)
                    return {"status": "stopped", "rounds": at.rounds}
                results = answered
            at = course.round_ran(at, await run.model_round(step.round_id, results, at.rounds))


@dataclass(frozen=True)
class _Run:
    """The steps of one call of the function, as `run_steps` runs them."""

    ctx: inngest.Context
    job: BackgroundJob
    events: inngest.Inngest

    @property
    def settings(self) -> Settings:
        return self.job.services.settings

    @property
    def last_attempt(self) -> bool:
        # A step's last attempt ends the job with the failure's plain words instead of raising.
        return self.ctx.attempt >= RETRIES

    async def finalize(self, step: course.Finalize) -> bool:
        body = _step_body(self.job.finalize, self.job, "finalize", self.ctx.attempt)
        return await self.ctx.step.run(step.step_id, body, self.events)

    async def opening(self, step: course.Opening) -> Plan:
        body = _step_body(self.job.rounds.open, self.job, "model round", self.ctx.attempt)
        out = await self.ctx.step.run(step.step_id, body, self.ctx.attempt, self.last_attempt)
        return Plan.from_json(out)

    async def model_round(self, step_id: str, results: list[ToolResult], round_no: int) -> Plan:
        attributes: dict[str, str | int] = {"handoff.round": round_no}
        resume = self.job.rounds.resume
        body = _step_body(resume, self.job, "model round", self.ctx.attempt, attributes)
        out = await self.ctx.step.run(step_id, body, results, self.ctx.attempt, self.last_attempt)
        return Plan.from_json(out)

    async def answer(self, step: course.ToolRound) -> list[ToolResult] | None:
        """The round's results in the order the model made the calls (those refused last):
        the user's first, one prompt at a time, then each tool call as a step of its own, in
        parallel. None when the job ended while waiting for the user."""
        answered: dict[str, ToolResult] = {}
        decisions: dict[str, Decision] = {}
        for ask in step.asks:
            call = ask.call
            if ask.kind == "refuse-question":
                refuse = self.job.prompts.refuse_question
                answered[call["id"]] = await self.ctx.step.run(
                    f"refuse-question-{call['id']}", refuse, call
                )
                continue
            if ask.kind == "question":
                answer = await ask_wait_settle(
                    self.ctx, prompts.question(self.job, call), self.settings
                )
                if answer is None:
                    return None
                answered[call["id"]] = answer
            else:
                decided = await ask_wait_settle(
                    self.ctx, prompts.approval(self.job, call), self.settings
                )
                if decided is None:
                    return None
                decisions[call["id"]] = decided
        ran = iter(await self._tools(step, decisions))
        results = [answered[c["id"]] if c["id"] in answered else next(ran) for c in step.calls]
        if step.refused:
            refuse_calls = self.job.tool_calls.refuse
            results += await self.ctx.step.run(step.refuse_id, refuse_calls, list(step.refused))
        return results

    async def _tools(
        self, step: course.ToolRound, decisions: dict[str, Decision]
    ) -> tuple[ToolResult, ...]:
        """Each running call's result, its step run in parallel with the others."""
        tool_steps = (
            partial(
                self.ctx.step.run,
                f"tool-{call['id']}",
                _step_body(
                    self.job.tool_calls.run_tool,
                    self.job,
                    f"execute_tool {call['name']}",
                    self.ctx.attempt,
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": call["name"],
                        "gen_ai.tool.call.id": call["id"],
                    },
                ),
                call,
                decisions.get(call["id"]),
                self.last_attempt,
                step.bound,
            )
            for call in step.running
        )
        return await self.ctx.group.parallel(tuple(tool_steps)) if step.running else ()


def _step_body(
    body: Callable[P, Awaitable[R]],
    job: BackgroundJob,
    span: str,
    attempt: int,
    attributes: dict[str, str | int] | None = None,
) -> Callable[P, Awaitable[R]]:
    """The step body as a span of its turn's trace (`span`; a retry is another span, its
    `handoff.attempt` counting from 0), its failures said in Inngest's terms: one no retry
    can mend is non-retriable, a busy provider's retried after the time it asked for."""

    async def step(*args: P.args, **kwargs: P.kwargs) -> R:
        with telemetry.tracer.start_as_current_span(
            span,
            context=telemetry.context_of(job.turn.trace),
            attributes={
                **job.turn.attributes,
                "handoff.job.id": job.job_key,
                "handoff.attempt": attempt,
                **(attributes or {}),
            },
        ):
            return await _inngest_terms(body, *args, **kwargs)

    return step


async def _inngest_terms(body: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
    try:
        return await body(*args, **kwargs)
    except JobFailed as exc:
        raise inngest.NonRetriableError(str(exc)) from exc
    except RetryLater as exc:
        if exc.after_s is None:
            raise
        raise inngest.RetryAfterError(str(exc), timedelta(seconds=exc.after_s)) from exc
