"""Running a round's tool calls, each the body of a step, and storing their results.

Each call's first result is stored (by thread and call id) and reused on every retry and
replay; the tool is invoked with the model's whole `ToolCall`, so a tool that acts outside can
pass the call id on as its idempotency key (the tool contract, docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from agent.tools import ToolInputError, requires_approval
from infra import telemetry
from infra.large_outputs import LARGE_OUTPUT_BYTES, LargeOutputs
from infra.store.approvals import Decision
from infra.store.tool_results import ToolResult, fetch_result, store_result
from turns.plan import PlannedCall
from turns.scope import JobScope

logger = logging.getLogger(__name__)


class ToolCallFailed(RuntimeError):
    """The model's call cannot be answered by the tool: its text is what the model reads."""


async def keep_result(scope: JobScope, result: ToolResult) -> ToolResult:
    """Store a call's result, counted by tool and status; the stored one (first wins)."""
    status = result.get("status", "success")
    telemetry.TOOL_CALLS.add(1, {"gen_ai.tool.name": result["name"], "handoff.tool.status": status})
    pool = await scope.services.pool()
    return await store_result(pool, scope.job_key, scope.turn.thread_id, result)


@dataclass(frozen=True)
class ToolCalls(JobScope):
    """The tool calls of the job's rounds; large outputs go to `large_outputs`."""

    large_outputs: LargeOutputs

    async def run_tool(
        self,
        call: PlannedCall,
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
        # A replay of a failed job, or a retry after a lost step output, finds the result.
        stored = await fetch_result(pool, self.turn.thread_id, call["id"])
        if stored is not None:
            return stored
        async with pool.connection() as conn:
            still_ours = await self.holds(conn)
        if not still_ours:
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
        self, call: PlannedCall, approved: bool, last_attempt: bool
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
        return await keep_result(self, result)

    async def _invoke(self, call: PlannedCall, *, approved: bool) -> str:
        """The tool's output; ToolCallFailed when the call itself is wrong."""
        tool = self.tool(call["name"])
        if tool is None:
            known = ", ".join(sorted(t.name for t in self.assistant.tools))
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

    async def refuse(self, calls: list[PlannedCall]) -> list[ToolResult]:
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
                self.job_key,
                self.turn.thread_id,
                ToolResult(id=call["id"], name=call["name"], content=text, status="error"),
            )
            for call in calls
        ]


def timed_out(call: PlannedCall, timeout_s: float) -> ToolResult:
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


def declined_text(call: PlannedCall, decision: Decision) -> str:
    """What the model reads for a call that did not run because of the user's answer."""
    if decision["timed_out"]:
        return f"No answer from the user in time, so {call['name']} was not run."
    note = f" Their note: {decision['note']}" if decision["note"] else ""
    return f"The user rejected this call, so {call['name']} was not run.{note}"
