"""The steps of a background job (`tool-handoff`), as methods of the job they belong to.

A `HandoffJob` is made from the event; the claim step reads the job row, whose payload outranks
the event's data, and `claimed` makes the job that every later step runs on. Each step body reads
only what its job and its arguments hold, so a replay, which runs the plan from the top with
memoized step outputs, sees exactly what the first run saw.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from agent.display import display_arguments
from agent.graph import state_values
from agent.snapshot import APOLOGY, INCOMPATIBLE_VERSION, render_agent_snapshot
from agent.tools import ToolInputError, asks_user, requires_approval
from agent.usage import turn_usage
from infra import telemetry
from infra.events import EventSender
from infra.large_outputs import LARGE_OUTPUT_BYTES, LargeOutputs, output_bound
from infra.runtime import Services
from infra.store import approvals, jobs, pauses, questions
from infra.store.approvals import Decision
from infra.store.tool_results import ToolResult, fetch_result, store_result
from turns.engine import IncompatibleCheckpoint, check_schema, durable_state, spent
from turns.failures import JobFailed
from turns.rounds import Plan, Rounds, asking_tools, plan_from
from turns.start import send_queued_turns
from turns.turn import Turn

logger = logging.getLogger(__name__)


class ToolCallFailed(RuntimeError):
    """The model's call cannot be answered by the tool: its text is what the model reads."""


class Claim(Plan):
    claimed: bool
    payload: dict[str, Any]  # the job's stored turn, which outranks the event's data


@dataclass(frozen=True)
class HandoffJob:
    """The job `job_key`, run by the Inngest run `run_id`, for `turn`."""

    services: Services
    tools: list[BaseTool]
    large_outputs: LargeOutputs
    job_key: str
    run_id: str
    turn: Turn

    @property
    def log(self) -> dict[str, str]:
        return {"chat_id": str(self.turn.chat_id), "job_id": self.job_key}

    @property
    def rounds(self) -> Rounds:
        return Rounds(self.services, self.tools, self.turn, self.job_key, self.run_id)

    def tool(self, name: str) -> BaseTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def claimed(self, claim: Claim) -> HandoffJob:
        """The job as the claim found it in the database."""
        return replace(self, turn=Turn.model_validate(claim["payload"]))

    async def claim(self) -> Claim:
        """Take the job for this run and plan its first step; unclaimed if it is not ours."""
        pool = await self.services.pool()
        settings = self.services.settings
        job = await jobs.claim(pool, self.job_key, self.run_id, lease_s=settings.job_lease_s)
        if job is None:
            return {"claimed": False, "done": True, "pending": [], "payload": {}}
        turn = Turn.model_validate(job.payload)
        if job.attempt == 1 and turn.handed_off_at is not None:
            telemetry.RESUME_OVERHEAD.record(max(0.0, time.time() - turn.handed_off_at))
        state = await durable_state(pool, turn, self.tools, settings)
        try:
            check_schema(state)
        except IncompatibleCheckpoint as exc:
            logger.error(
                "checkpoint from an incompatible version", extra={**self.log, "error": str(exc)}
            )
            await jobs.fail(
                pool,
                job_key=self.job_key,
                user_text=INCOMPATIBLE_VERSION,
                error="incompatible_version",
            )
            raise JobFailed(str(exc)) from exc
        plan: Plan = {"done": False, "pending": [], "opening": True}
        if turn.kind == "handoff":
            plan = plan_from(state, settings.max_parallel_tool_calls, asking_tools(self.tools))
            async with pool.connection() as conn:
                if not plan["done"] and await pauses.pause_requested(conn, self.job_key):
                    plan["pause"] = True
        return {"claimed": True, "payload": job.payload, **plan}

    async def run_tool(
        self,
        call: dict[str, Any],
        decision: Decision | None = None,
        last_attempt: bool = False,
        bound: int = LARGE_OUTPUT_BYTES,
    ) -> ToolResult:
        """One tool call's result, stored once: a call that already ran is not run again.

        A call the tool cannot answer (no such tool, invalid arguments, a failure on the last
        attempt, a run past TOOL_TIMEOUT_S) gets an `error` result for the model to read; an
        earlier failure raises, and the step is retried. The output takes at most `bound`
        bytes of the step output (infra/large_outputs.py).
        """
        pool = await self.services.pool()
        thread_id = self.turn.thread_id
        # A replay of a failed job, or a retry after a lost step output, finds the result.
        stored = await fetch_result(pool, thread_id, call["id"])
        if stored is not None:
            return stored
        async with pool.connection() as conn:
            held = await jobs.hold(conn, self.job_key, self.run_id)
        if not held:
            # Canceled meanwhile: a tool that acts outside (an email) must not act now. The
            # round after this step finds the job gone and stops; nothing is stored.
            return ToolResult(id=call["id"], name=call["name"], content="")
        if decision is not None and not decision["approved"]:
            text = declined_text(call, decision)
            declined = ToolResult(id=call["id"], name=call["name"], content=text)
            return await self._keep(declined)
        content = await self._output(call, decision is not None, last_attempt)
        if not isinstance(content, str):
            return await self._keep(content)  # the error result the model reads instead
        result = ToolResult(id=call["id"], name=call["name"], content=content)
        shrunk = await self.large_outputs.shrink(
            job_key=self.job_key,
            call_id=call["id"],
            name=call["name"],
            content=content,
            limit=bound,
        )
        if shrunk is not None:
            result["content"], result["artifact"] = shrunk["content"], shrunk["artifact"]
            result["note"] = shrunk["note"]
        return await self._keep(result)

    async def _output(
        self, call: dict[str, Any], approved: bool, last_attempt: bool
    ) -> str | ToolResult:
        """The tool's output, or the error result the model reads instead; raises a failure
        that a later attempt may mend."""
        timeout_s = self.services.settings.tool_timeout_s
        # The step must end before the platform's timeout does: a tool that runs past its time
        # is stopped (a synchronous tool's thread runs on unobserved; its output is dropped).
        deadline = asyncio.timeout(timeout_s)
        try:
            async with deadline:
                return await self._invoke(call, approved=approved)
        except ToolCallFailed as failed:
            return ToolResult(id=call["id"], name=call["name"], content=str(failed), status="error")
        except Exception as exc:
            if deadline.expired():
                logger.warning(
                    "tool stopped after its time budget", extra={**self.log, "timeout_s": timeout_s}
                )
                return timed_out(call, timeout_s)
            if not last_attempt:
                raise
            logger.exception("tool failed on its last attempt", extra=self.log)
            text = f"Error: {call['name']} failed ({type(exc).__name__}) on every retry."
            return ToolResult(id=call["id"], name=call["name"], content=text, status="error")

    async def _keep(self, result: ToolResult) -> ToolResult:
        """Store a call's result, counted by tool and status; the stored one (first wins)."""
        status = result.get("status", "success")
        telemetry.TOOL_CALLS.add(
            1, {"gen_ai.tool.name": result["name"], "handoff.tool.status": status}
        )
        return await store_result(await self.services.pool(), self.turn.thread_id, result)

    def needs_approval(self, call: dict[str, Any]) -> bool:
        """Whether the call waits for the user's approval before it runs: its tool asks for
        that, and its arguments are valid. A call with invalid arguments (an e-mail address that
        is not one) is not put to the user: it gets an error result for the model to fix."""
        tool = self.tool(call["name"])
        return (
            tool is not None
            and requires_approval(tool)
            and argument_problems(tool, call["args"]) is None
        )

    async def _invoke(self, call: dict[str, Any], *, approved: bool) -> str:
        """The tool's output; ToolCallFailed when the call itself is wrong."""
        tool = self.tool(call["name"])
        if tool is None:
            known = ", ".join(sorted(t.name for t in self.tools))
            raise ToolCallFailed(f"Error: there is no tool {call['name']!r}. Tools: {known}.")
        if problems := argument_problems(tool, call["args"]):
            raise ToolCallFailed(problems)
        if requires_approval(tool) and not approved:
            # Not reached through the step plan, which asks first; never run such a tool unasked.
            raise ToolCallFailed(f"Error: {call['name']} was not run: the user was not asked.")
        try:
            # Invoked as a tool call, so a tool can take the call id (InjectedToolCallId) as
            # the idempotency key of whatever it does outside.
            output = await tool.ainvoke({**call, "type": "tool_call"})
        except ToolInputError as exc:
            raise ToolCallFailed(f"Error: invalid input for {call['name']}: {exc}") from exc
        except ValidationError as exc:
            raise ToolCallFailed(invalid_arguments_text(call["name"], exc)) from exc
        return str(output.content if isinstance(output, ToolMessage) else output)

    def output_bound(self, calls: int) -> int:
        """The bytes each output of a round that runs `calls` calls may take: the round's
        budget shared evenly, so parallel steps that cannot see each other stay within it."""
        return output_bound(self.services.settings.tool_round_budget_bytes, calls)

    def within_limit(
        self, calls: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The calls of a round that run, and those past MAX_PARALLEL_TOOL_CALLS that do not."""
        limit = self.services.settings.max_parallel_tool_calls
        return calls[:limit], calls[limit:]

    async def refuse(self, calls: list[dict[str, Any]]) -> list[ToolResult]:
        """An error result for each call past the round's limit, stored like any other."""
        pool = await self.services.pool()
        limit = self.services.settings.max_parallel_tool_calls
        text = (
            f"Error: this call was not run: at most {limit} tool calls run at once. Make the"
            " calls that are still needed in a later step."
        )
        return [
            await store_result(
                pool,
                self.turn.thread_id,
                ToolResult(id=call["id"], name=call["name"], content=text, status="error"),
            )
            for call in calls
        ]

    async def ask_approval(self, call: dict[str, Any], timeout_s: float) -> bool | None:
        """Put the call to the user. True: wait for them. False: decided already (a replay).
        None: the job is no longer this run's."""
        expires = datetime.now(UTC) + timedelta(seconds=timeout_s)
        pending = {
            "toolCallId": call["id"],
            "name": call["name"],
            "args": call["args"],
            # What a frontend shows: the arguments with nothing hidden (agent/display.py).
            "display": display_arguments(call["args"]),
            "expiresAt": expires.isoformat(),
        }
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return None
            return await approvals.ask(conn, self.turn.reply_id, pending)

    async def awaits_approval(self, call: dict[str, Any]) -> bool:
        """Whether the call still waits for the user's decision (read when a wait ended
        without the event): False once decided, past its time, or the job not this run's."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return False
            return await approvals.waiting(conn, self.turn.reply_id, call["id"])

    async def settle_approval(self, call: dict[str, Any]) -> Decision | None:
        """The user's decision, or a timeout if there is none; None if the job is gone."""
        timed_out = Decision(approved=False, note=None, timed_out=True)
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return None
            return await approvals.settle(conn, self.turn.reply_id, call["id"], timed_out)

    def asks_user(self, call: dict[str, Any]) -> bool:
        """Whether the call is a question for the user, with valid arguments: one with invalid
        arguments is not put to anyone, its tool step gives the model an error result."""
        tool = self.tool(call["name"])
        return (
            tool is not None and asks_user(tool) and argument_problems(tool, call["args"]) is None
        )

    async def ask_question(self, call: dict[str, Any], timeout_s: float) -> bool | None:
        """Put the model's question to the user. True: wait for them. False: answered already
        (a replay). None: the job is no longer this run's."""
        args = call["args"]
        expires = datetime.now(UTC) + timedelta(seconds=timeout_s)
        pending = {
            "questionId": call["id"],
            "question": args["question"],
            "options": list(args["options"]),
            "context": args.get("context", ""),
            "expiresAt": expires.isoformat(),
        }
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return None
            return await questions.ask(conn, self.turn.reply_id, pending)

    async def awaits_answer(self, call: dict[str, Any]) -> bool:
        """Whether the question still waits for the user's answer (read when a wait ended
        without the event): False once answered, past its time, or the job not this run's."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return False
            return await questions.waiting(conn, self.turn.reply_id, call["id"])

    async def settle_question(self, call: dict[str, Any]) -> ToolResult | None:
        """The call's result: the user's answer, or that nobody answered in time; stored like
        any tool result. None if the job is gone."""
        stored = await fetch_result(await self.services.pool(), self.turn.thread_id, call["id"])
        if stored is not None:
            return stored
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return None
            answer = await questions.settle(conn, self.turn.reply_id, call["id"])
        timeout_s = self.services.settings.question_timeout_s
        return await self._keep(
            ToolResult(id=call["id"], name=call["name"], content=answer_text(answer, timeout_s))
        )

    async def refuse_question(self, call: dict[str, Any]) -> ToolResult:
        """An error result for a question past MAX_QUESTIONS_PER_TURN: nobody is asked."""
        limit = self.services.settings.max_questions_per_turn
        text = (
            f"Error: this question was not put to the user: at most {limit} questions may be"
            " asked in one answer. Go on with your best judgement and say what you assumed."
        )
        error = ToolResult(id=call["id"], name=call["name"], content=text, status="error")
        return await self._keep(error)

    async def pause(self) -> bool | None:
        """Job and reply `paused`, as the user asked. True: wait for the resume. False: no
        pause is asked for (any more). None: the job is no longer this run's."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return None
            timeout_s = self.services.settings.pause_timeout_s
            return await pauses.pause(conn, self.job_key, self.run_id, timeout_s)

    async def awaits_resume(self) -> bool:
        """Whether the pause goes on (read when a wait ended without the event): False once
        resumed, canceled, or past PAUSE_TIMEOUT_S."""
        timeout_s = self.services.settings.pause_timeout_s
        async with (await self.services.pool()).connection() as conn:
            return await pauses.still_paused(conn, self.job_key, self.run_id, timeout_s)

    async def settle_pause(self, events: EventSender) -> bool:
        """After the wait: True when resumed (its instruction, if any, now in the thread);
        False when the job ended meanwhile (canceled, or never resumed: then it ends now,
        `canceled`, and a turn waiting behind it goes)."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            resumed = await pauses.settle(conn, self.job_key)
        if not resumed.resumed:
            await send_queued_turns(
                await self.services.pool(), events, self.turn.chat_id, self.turn.assistant_id
            )
            return False
        if resumed.instruction:
            return await self.rounds.note_instruction(resumed.instruction)
        return True

    async def finalize(self, events: EventSender) -> bool:
        """The reply's final text from the thread's head; then a turn waiting behind it goes.
        False, and nothing changes, when a message steered into the job is not in the thread
        yet: another round answers it first."""
        pool = await self.services.pool()
        state = await durable_state(pool, self.turn, self.tools, self.services.settings)
        values = state_values(state)
        snapshot = render_agent_snapshot(values)
        used = turn_usage(values)
        outcome = jobs.Outcome(
            content=snapshot.text,
            checkpoint_id=state.config["configurable"].get("checkpoint_id"),
            usage=dict(used),
            tool_calls=len(snapshot.progress),
            spent=spent(self.turn, used, snapshot),
        )
        held = [str(m.id) for m in values.get("messages", [])]
        if not await jobs.finish(
            pool, job_key=self.job_key, message_id=self.turn.reply_id, outcome=outcome, held=held
        ):
            return False
        await send_queued_turns(pool, events, self.turn.chat_id, self.turn.assistant_id)
        return True


async def fail_job(services: Services, events: EventSender, job_key: str, data: Any) -> None:
    """After the last retry: the reply says so in plain words, and the chat's slot is free."""
    pool = await services.pool()
    await jobs.fail(pool, job_key=job_key, user_text=APOLOGY, error="job_failed")
    try:
        turn = Turn.model_validate(data)
    except ValidationError:
        return  # not a turn's event: no chat to free
    await send_queued_turns(pool, events, turn.chat_id, turn.assistant_id)


def timed_out(call: dict[str, Any], timeout_s: float) -> ToolResult:
    """The result of a call stopped after its time budget."""
    return ToolResult(
        id=call["id"],
        name=call["name"],
        content=f"Error: {call['name']} took longer than {timeout_s:g} s and was stopped.",
        status="error",
        note=f"Stopped: it took longer than {timeout_s:g} s.",
    )


def argument_problems(tool: BaseTool, args: Any) -> str | None:
    """What the model reads when `args` do not fit the arguments `tool` takes from it; None
    when they do (or when the tool gives no model to check them against)."""
    schema = tool.tool_call_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return None
    try:
        schema.model_validate(args)
    except ValidationError as exc:
        return invalid_arguments_text(tool.name, exc)
    return None


def invalid_arguments_text(name: str, exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
        for error in exc.errors(include_url=False, include_input=False)
    )
    return f"Error: invalid arguments for {name}: {problems}. Fix them and call again."


def answer_text(answer: questions.Answer, timeout_s: float) -> str:
    """What the model reads as the result of its question."""
    if answer["timed_out"] or answer["answer"] is None:
        minutes = f"{timeout_s / 60:g} minutes" if timeout_s >= 60 else f"{timeout_s:g} s"
        return (
            f"The user did not answer within {minutes}. Go on with your best judgement, and say"
            " what you assumed."
        )
    return f"The user answered: {answer['answer']}"


def declined_text(call: dict[str, Any], decision: Decision) -> str:
    """What the model reads for a call that did not run because of the user's answer."""
    if decision["timed_out"]:
        return f"No answer from the user in time, so {call['name']} was not run."
    note = f" Their note: {decision['note']}" if decision["note"] else ""
    return f"The user rejected this call, so {call['name']} was not run.{note}"
