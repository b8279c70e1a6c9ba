"""The model rounds of one background job, each the body of a step.

A round runs on an in-memory copy of the thread's latest checkpoint, the job's own (the first
round of an enqueued turn: the active branch's head; turns/engine.py); its checkpoints land in
one transaction, and only while the run still holds the job. A round canceled half-way leaves
the thread as it was, not with an answer the user never saw.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from langchain_core.messages import AnyMessage, ToolMessage
from langgraph.types import StateSnapshot

from agent.assistants import Assistant
from agent.errors import classify
from agent.graph import (
    AGENT_NODE,
    TOOLS_NODE,
    pending_tool_calls,
    state_values,
    steered_message,
)
from agent.snapshot import PARAGRAPH_BREAK, render_agent_snapshot, turn_text
from agent.state import AgentState, ToolInvocation
from agent.usage import turn_usage
from infra import telemetry
from infra.db import Conn
from infra.runtime import Services
from infra.store import branches, jobs, messages, pauses, steers
from infra.store.drafts import DraftWriter
from infra.store.tool_results import ToolResult
from turns import endings
from turns.engine import Run, began, load_run, opening, store_run
from turns.failures import JobFailed, RetryLater
from turns.plan import Plan, PlanJson, asking_tools, plan_from
from turns.shown import stream_round
from turns.turn import Turn

logger = logging.getLogger(__name__)


async def unapplied_steers(conn: Conn, job_key: str, state: StateSnapshot) -> bool:
    """Whether a message steered into the job is not in `state`'s thread yet."""
    in_thread = {m.id for m in state.values.get("messages", [])}
    return any(m["id"] not in in_thread for m in await steers.steered(conn, job_key))


@dataclass(frozen=True)
class Rounds:
    """The rounds of the job `job_key` for `turn`, as held by the Inngest run `run_id`."""

    services: Services
    assistant: Assistant
    turn: Turn
    job_key: str
    run_id: str

    async def open(self, attempt: int = 0, last_attempt: bool = False) -> PlanJson:
        """The first round of an enqueued message's turn, from the active branch's head;
        messages steered into the turn before it began follow its own.

        Once this round is stored, the head is the turn's own: a re-run of the step (its output
        lost, or the job run afresh after its process died) plans from there. Run again, it
        would answer the turn's pending calls as those of a canceled turn, never run them."""
        run = await self._load(opens=True)
        if began(await run.state(), self.turn):
            return (await self._store(run, opened=False)).to_json()
        graph_input = await opening(run, await self._asked())
        graph_input["messages"] = [*graph_input["messages"], *await self._steered(run)]
        await self._stream(run, graph_input, "", attempt, last_attempt)
        return (await self._store(run, opened=True)).to_json()

    async def _asked(self) -> Turn:
        """The turn with its message's text, which its payload does not carry (one stored
        before may): read from the message row."""
        if self.turn.content is not None or self.turn.user_message_id is None:
            return self.turn
        async with (await self.services.pool()).connection() as conn:
            content = await messages.content_of(conn, self.turn.user_message_id)
        return self.turn.model_copy(update={"content": content})

    async def _steered(self, run: Run) -> list[AnyMessage]:
        """The messages steered into the job that the run's thread does not hold yet, in the
        order they came: by message id, so a retried or replayed round adds none twice."""
        async with (await self.services.pool()).connection() as conn:
            joined = await steers.steered(conn, self.job_key)
        in_thread = {m.id for m in (await run.state()).values.get("messages", [])}
        return [steered_message(m["id"], m["content"]) for m in joined if m["id"] not in in_thread]

    async def resume(
        self, results: list[ToolResult], attempt: int = 0, last_attempt: bool = False
    ) -> PlanJson:
        """Apply the tool results, then run the model to its next tool boundary or the end.

        Postponed, without running, when the user asked the job to pause: the round is the next
        step, and a pause happens between steps."""
        async with (await self.services.pool()).connection() as conn:
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return (await self._stopped(None)).to_json()
            if await pauses.pause_requested(conn, self.job_key):
                return Plan.postponed().to_json()
        run = await self._load(opens=False)
        state = await run.state()
        answered = {m.tool_call_id for m in state.values["messages"] if isinstance(m, ToolMessage)}
        fresh = [r for r in results if r["id"] not in answered]
        # Applying results is keyed by tool call id: a retried round applies nothing twice.
        if fresh and TOOLS_NODE in state.next:
            await _apply(run, state, fresh)
            state = await run.state()
            # Subscribers see the tools done before this round's text starts to stream.
            async with (await self.services.pool()).connection() as conn:
                await self._record_snapshot(conn, state)
        # Messages sent with `steer` join here, once the tools' results are in (or after an
        # answer that was about to be the last one), and the model sees them now.
        if TOOLS_NODE not in state.next and (joined := await self._steered(run)):
            await run.graph.aupdate_state(run.config, {"messages": joined}, as_node=TOOLS_NODE)
            state = await run.state()
        if AGENT_NODE in state.next:
            before = turn_text(state_values(state))
            prefix = before + PARAGRAPH_BREAK if before else ""
            await self._stream(run, None, prefix, attempt, last_attempt)
        return (await self._store(run, opened=False)).to_json()

    async def _load(self, *, opens: bool) -> Run:
        pool = await self.services.pool()
        return await load_run(pool, self.turn, self.assistant, self.services.settings, opens=opens)

    async def _store(self, run: Run, *, opened: bool) -> Plan:
        """The round's checkpoints land in one transaction, while this run holds the job."""
        state = await run.state()
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return await self._stopped(state)
            marks = await store_run(conn, run, self.turn, opened=opened)
            # The turn's usage so far lands with the round: a job canceled or failed later
            # still counts the rounds it stored.
            await self._record_snapshot(conn, state, with_usage=True)
            if marks:
                await branches.mark_reply(conn, self.turn.reply_id, marks)
            plan = plan_from(
                state,
                self.services.settings.max_parallel_tool_calls,
                asking_tools(self.assistant.tools),
            )
            if not plan.done and await pauses.pause_requested(conn, self.job_key):
                plan = plan.paused()
            if plan.done and await unapplied_steers(conn, self.job_key, state):
                # A message joined while this round ran: one more round answers it.
                plan = Plan.model_round()
        return plan

    async def _stopped(self, state: StateSnapshot | None) -> Plan:
        """The job is no longer this run's: the round stores nothing. A job deleted with its
        chat or reply still counts what this round's model used (`state`: None if it ran
        none)."""
        pool = await self.services.pool()
        if state is None:
            await endings.stop_erased(pool, self.turn, self.job_key)
        else:
            values = state_values(state)
            used, snapshot = turn_usage(values), render_agent_snapshot(values)
            await endings.stop_erased(pool, self.turn, self.job_key, used=used, snapshot=snapshot)
        return Plan.stop()

    async def note_instruction(self, instruction: str) -> bool:
        """The user's instruction, given on resuming, into the thread's state: every later
        model call of the turn gets it. False when the job is no longer this run's."""
        run = await self._load(opens=False)
        # As the agent's own update: the thread stays where it paused (before its tools).
        await run.graph.aupdate_state(run.config, {"instruction": instruction}, as_node=AGENT_NODE)
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await jobs.hold(conn, self.job_key, self.run_id):
                return False
            await store_run(conn, run, self.turn, opened=False)
        return True

    async def _record_snapshot(
        self, conn: Conn, state: StateSnapshot, *, with_usage: bool = False
    ) -> None:
        values = state_values(state)
        snapshot = render_agent_snapshot(values)
        if not with_usage:
            await messages.record_snapshot(conn, self.turn.reply_id, snapshot.to_metadata())
            return
        used = turn_usage(values)
        await messages.record_snapshot(conn, self.turn.reply_id, snapshot.to_metadata(), usage=used)
        await endings.record_usage(conn, self.turn, used, snapshot)

    async def _stream(
        self,
        run: Run,
        graph_input: AgentState | None,
        prefix: str,
        attempt: int,
        last_attempt: bool,
    ) -> None:
        """Stream the round into the draft. A provider's error is retried later while it may
        pass and attempts are left; otherwise the job ends, the reply keeping what it showed
        and the error's plain words after it."""
        if attempt > 0:
            # An attempt before this one failed mid-round: its model calls may be paid for
            # again, which is never silent. (A round whose result was only lost finds its
            # checkpoints stored and runs no model.)
            logger.warning("model round run again", extra={**self.log, "attempt": attempt})
            await jobs.count_rerun(await self.services.pool(), self.job_key)
        try:
            await self._draft(run, graph_input, prefix)
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            logger.warning("model call failed", extra={**self.log, **failure.log()})
            if failure.retriable and not last_attempt:
                raise RetryLater(failure.kind, failure.retry_after_s) from exc
            pool, text = await self.services.pool(), failure.user_text
            await endings.fail(pool, job_key=self.job_key, user_text=text, error=failure.kind)
            raise JobFailed(failure.kind) from exc

    @property
    def log(self) -> dict[str, str]:
        return {**self.turn.log, "job_id": self.job_key}

    async def _draft(self, run: Run, graph_input: AgentState | None, prefix: str) -> None:
        settings = self.services.settings
        writer = DraftWriter.for_reply(
            await self.services.pool(),
            settings,
            reply_id=self.turn.reply_id,
            chat_id=self.turn.chat_id,
            # The draft is the whole message: earlier text, then this round's paragraph.
            text=prefix,
        )
        await writer.start()
        deadline = asyncio.get_running_loop().time() + settings.round_budget_s
        if (await stream_round(run, graph_input, writer, deadline)).restarted:
            logger.warning("model round started its answer over", extra=self.log)
        logger.info("model round streamed", extra={**self.log, "draft_writes": writer.writes})
        telemetry.DRAFT_WRITES.record(writer.writes, {"handoff.path": "background"})
        if state_values(await run.state()).get("cut_short") == "time":
            logger.warning("model round stopped at its time budget", extra=self.log)


async def _apply(run: Run, state: StateSnapshot, results: list[ToolResult]) -> None:
    """The tool results as the tools node's output, with each call's progress completed."""
    calls = {c["id"]: c for c in pending_tool_calls(state.values["messages"])}
    invocations: list[ToolInvocation] = []
    for r in results:
        invocation: ToolInvocation = {
            "id": r["id"],
            "name": r["name"],
            "args": calls[r["id"]]["args"] if r["id"] in calls else {},
            "status": "error" if r.get("status") == "error" else "completed",
        }
        if note := r.get("note"):
            invocation["note"] = note
        invocations.append(invocation)
    tool_messages = [
        ToolMessage(
            content=r["content"],
            tool_call_id=r["id"],
            name=r["name"],
            artifact=r.get("artifact"),
            status=r.get("status", "success"),
        )
        for r in results
    ]
    update = {"messages": tool_messages, "tool_invocations": invocations, "status": "running_tools"}
    await run.graph.aupdate_state(run.config, update, as_node=TOOLS_NODE)
