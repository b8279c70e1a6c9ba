"""`tool-handoff`: resume the agent from its durable checkpoint, run tools as steps, finalize.

Inngest re-runs this handler from the top for every step and hands back memoized step outputs,
so everything outside `step.run` is deterministic and free of side effects: the plan of what to
do next is itself a step output, never a fresh database read. The step bodies are the methods of
a `HandoffJob` (turns/job.py); this module is only their order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from typing import Any, ParamSpec, TypeVar

import inngest
from langchain_core.tools import BaseTool
from pydantic import ValidationError

from functions.approvals import await_decision
from functions.pauses import await_resume
from functions.questions import await_answer
from infra import telemetry
from infra.events import CANCEL_EVENT, HANDOFF_EVENT
from infra.large_outputs import LargeOutputs
from infra.runtime import Services
from infra.store.approvals import Decision
from infra.store.tool_results import ToolResult
from turns.failures import JobFailed, RetryLater
from turns.job import HandoffJob, fail_job
from turns.rounds import Plan
from turns.turn import Turn

logger = logging.getLogger(__name__)

FUNCTION_ID = "tool-handoff"
RETRIES = 4

P = ParamSpec("P")
R = TypeVar("R")


def create_tool_handoff(
    client: inngest.Inngest, services: Services, tools: list[BaseTool]
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
        await fail_job(services, client, original["id"], original.get("data"))

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
    async def tool_handoff(ctx: inngest.Context) -> dict[str, Any]:
        try:
            turn = Turn.model_validate(ctx.event.data)
        except ValidationError as exc:
            raise inngest.NonRetriableError("invalid chat/tool_handoff payload") from exc
        if not ctx.event.id:
            raise inngest.NonRetriableError("chat/tool_handoff needs an event id")
        job = HandoffJob(services, tools, large_outputs, ctx.event.id, ctx.run_id, turn)
        return await run_steps(ctx, job, client)

    return tool_handoff


async def run_steps(
    ctx: inngest.Context, job: HandoffJob, events: inngest.Inngest
) -> dict[str, Any]:
    """The plan: claim, then tools and a model round until the model is done, then finalize."""
    claim = await ctx.step.run("claim", _step_body(job.claim, job, "claim", ctx.attempt))
    if not claim["claimed"]:
        logger.info("job already taken or finished; nothing to do", extra=job.log)
        return {"status": "skipped"}
    # From here on the job row, written by the request that handed off, says which thread,
    # message and model this is: the event only names the job.
    job = job.claimed(claim)
    plan: Plan = claim
    # A step's last attempt ends the job with the failure's plain words instead of raising.
    last_attempt = ctx.attempt >= RETRIES
    if plan.get("opening"):
        opening = _step_body(job.rounds.open, job, "model round", ctx.attempt)
        plan = await ctx.step.run("model-round-opening", opening, ctx.attempt, last_attempt)
    round_no = 0
    pauses = 0
    finals = 0
    while True:
        if plan["done"]:
            if plan.get("stopped"):
                logger.info("job canceled or taken over; stopping", extra=job.log)
                return {"status": "stopped", "rounds": round_no}
            finished = await ctx.step.run(
                f"finalize-{finals}" if finals else "finalize",
                _step_body(job.finalize, job, "finalize", ctx.attempt),
                events,
            )
            if finished:
                return {"status": "completed", "rounds": round_no}
            # A message steered into the job came after its last round: one more answers it.
            finals += 1
            plan = {"done": False, "pending": []}
            continue
        if plan.get("pause"):
            # The user asked for a pause: it happens here, before the round's tools run.
            pauses += 1
            if not await await_resume(ctx, job, events, pauses):
                logger.info("job ended while paused", extra=job.log)
                return {"status": "stopped", "rounds": round_no}
        calls, refused = job.within_limit(plan["pending"])
        waited = await _ask_user(ctx, job, calls, plan.get("asked", 0))
        if waited is None:
            logger.info("job canceled while waiting for the user", extra=job.log)
            return {"status": "stopped", "rounds": round_no}
        answered, decisions = waited
        results = await _tool_results(ctx, job, calls, answered, decisions, last_attempt)
        if refused:
            results += await ctx.step.run(f"refuse-calls-{round_no}", job.refuse, refused)
        step_id = f"model-round-{round_no}"
        while True:
            plan = await ctx.step.run(
                step_id,
                _step_body(
                    job.rounds.resume, job, "model round", ctx.attempt, {"handoff.round": round_no}
                ),
                results,
                ctx.attempt,
                last_attempt,
            )
            if not plan.get("held"):
                break
            # Paused before the round: once resumed, the round runs as a step of its own.
            pauses += 1
            if not await await_resume(ctx, job, events, pauses):
                logger.info("job ended while paused", extra=job.log)
                return {"status": "stopped", "rounds": round_no}
            step_id = f"model-round-{round_no}-resumed-{pauses}"
        round_no += 1


async def _ask_user(
    ctx: inngest.Context, job: HandoffJob, calls: list[dict[str, Any]], asked: int
) -> tuple[dict[str, ToolResult], dict[str, Decision]] | None:
    """Questions for the user and calls that need the user's approval wait for them, one at a
    time: the answered questions' results (an answer is its call's result) and the decisions.
    None when the job ended while waiting."""
    max_questions = job.services.settings.max_questions_per_turn
    answered: dict[str, ToolResult] = {}
    decisions: dict[str, Decision] = {}
    for call in calls:
        if job.asks_user(call):
            if asked >= max_questions:
                answered[call["id"]] = await ctx.step.run(
                    f"refuse-question-{call['id']}", job.refuse_question, call
                )
                continue
            asked += 1
            answer = await await_answer(ctx, job, call)
            if answer is None:
                return None
            answered[call["id"]] = answer
        elif job.needs_approval(call):
            decided = await await_decision(ctx, job, call)
            if decided is None:
                return None
            decisions[call["id"]] = decided
    return answered, decisions


async def _tool_results(
    ctx: inngest.Context,
    job: HandoffJob,
    calls: list[dict[str, Any]],
    answered: dict[str, ToolResult],
    decisions: dict[str, Decision],
    last_attempt: bool,
) -> list[ToolResult]:
    """The round's results in the order the model made the calls: each call not answered by
    the user runs as a step of its own, in parallel."""
    running = [call for call in calls if call["id"] not in answered]
    # The round's outputs share its budget: each step's share follows from the plan alone.
    bound = job.output_bound(len(running))
    tool_steps = (
        partial(
            ctx.step.run,
            f"tool-{call['id']}",
            _step_body(
                job.run_tool,
                job,
                f"execute_tool {call['name']}",
                ctx.attempt,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": call["name"],
                    "gen_ai.tool.call.id": call["id"],
                },
            ),
            call,
            decisions.get(call["id"]),
            last_attempt,
            bound,
        )
        for call in running
    )
    ran = iter(await ctx.group.parallel(tuple(tool_steps)) if running else ())
    return [answered[c["id"]] if c["id"] in answered else next(ran) for c in calls]


def _step_body(
    body: Callable[P, Awaitable[R]],
    job: HandoffJob,
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
