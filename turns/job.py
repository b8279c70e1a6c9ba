"""A turn's background job (`tool-handoff`), whether it resumes a turn the quick path handed off
or runs a whole turn that waited in the queue: its claim, its pauses and its end, and its other
units.

A `BackgroundJob` is made from the event; the claim step reads the job row, whose payload outranks
the event's data, and `claimed` makes the job that every later step runs on. Its units are each a
`JobScope` (turns/scope.py) of that job: `rounds` (turns/rounds.py), `tool_calls`
(turns/tool_calls.py) and `prompts` (turns/prompts.py); what runs next is turns/course.py's to say.
Each step body reads only what its unit and its arguments hold, so a replay, which runs the plan
from the top with memoized step outputs, sees exactly what the first run saw.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Literal, Never

from pydantic import ValidationError

from agent.assistants import Assistants
from agent.graph import state_values
from agent.snapshot import APOLOGY, ASSISTANT_GONE, INCOMPATIBLE_VERSION, render_agent_snapshot
from agent.state import IncompatibleCheckpoint, check_version
from agent.usage import turn_usage
from infra import telemetry
from infra.events import EventSender, TurnPayload
from infra.large_outputs import LargeOutputs
from infra.runtime import Services
from infra.store import jobs, messages, pauses
from turns import endings
from turns.engine import durable_state
from turns.failures import JobFailed
from turns.plan import Plan, PlanJson, asking_tools, plan_from
from turns.prompts import Prompts
from turns.rounds import Rounds
from turns.scope import JobScope
from turns.tool_calls import ToolCalls
from turns.turn import Turn, spent

logger = logging.getLogger(__name__)


class Claimed(PlanJson):
    """The claim step's output when this run took the job: its first plan, and its turn."""

    claimed: Literal[True]
    payload: TurnPayload  # the job's stored turn, which outranks the event's data


class Unclaimed(PlanJson):
    """The claim step's output when the job is not this run's (taken, or ended)."""

    claimed: Literal[False]
    payload: dict[str, Never]  # always {}: runs in flight memoized the key


Claim = Claimed | Unclaimed


@dataclass(frozen=True)
class BackgroundJob(JobScope):
    """The job, with the bucket its large tool outputs go to."""

    large_outputs: LargeOutputs

    @property
    def rounds(self) -> Rounds:
        return Rounds(self.services, self.assistant, self.turn, self.job_key, self.run_id)

    @property
    def tool_calls(self) -> ToolCalls:
        scope = (self.services, self.assistant, self.job_key, self.run_id, self.turn)
        return ToolCalls(*scope, large_outputs=self.large_outputs)

    @property
    def prompts(self) -> Prompts:
        return Prompts(self.services, self.assistant, self.job_key, self.run_id, self.turn)

    def claimed(self, claim: Claimed) -> BackgroundJob:
        """The job as the claim found it in the database."""
        return replace(self, turn=Turn.model_validate(claim["payload"]))

    async def claim(self) -> Claim:
        """Take the job for this run and plan its first step; unclaimed if it is not ours."""
        pool = await self.services.pool()
        settings = self.services.settings
        async with pool.connection() as conn, conn.transaction():
            job = await jobs.claim(conn, self.job_key, self.run_id, lease_s=settings.job_lease_s)
            if job is None:
                return {"claimed": False, **Plan.finished().to_json(), "payload": {}}
            await messages.mark_streaming(conn, job.reply_id)
        turn = Turn.model_validate(job.payload)
        if job.attempt == 1 and turn.handed_off_at is not None:
            telemetry.RESUME_OVERHEAD.record(max(0.0, time.time() - turn.handed_off_at))
        state = await durable_state(pool, turn, self.assistant, settings)
        try:
            check_version(state.metadata, state.config.get("configurable", {}).get("checkpoint_id"))
        except IncompatibleCheckpoint as exc:
            logger.error(
                "checkpoint from an incompatible version", extra={**self.log, "error": str(exc)}
            )
            await endings.fail(
                pool,
                job_key=self.job_key,
                user_text=INCOMPATIBLE_VERSION,
                error="incompatible_version",
            )
            raise JobFailed(str(exc)) from exc
        plan = Plan.first_round()
        if turn.kind == "handoff":
            plan = plan_from(
                state, settings.max_parallel_tool_calls, asking_tools(self.assistant.tools)
            )
            async with pool.connection() as conn:
                if not plan.done and await pauses.pause_requested(conn, self.job_key):
                    plan = plan.paused()
        return {"claimed": True, "payload": job.payload, **plan.to_json()}

    async def pause(self) -> bool | None:
        """Job and reply `paused`, as the user asked. True: wait for the resume. False: no
        pause is asked for (any more). None: the job is no longer this run's."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await self.holds(conn):
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
        pool = await self.services.pool()
        resumed = await endings.settle_pause(pool, self.next(events), self.job_key)
        if not resumed.resumed:
            return False
        if resumed.instruction:
            return await self.rounds.note_instruction(resumed.instruction)
        return True

    async def finalize(self, events: EventSender) -> bool:
        """The reply's final text from the thread's head; then a turn waiting behind it goes.
        False, and nothing changes, when a message steered into the job is not in the thread
        yet: another round answers it first."""
        pool = await self.services.pool()
        state = await durable_state(pool, self.turn, self.assistant, self.services.settings)
        values = state_values(state)
        snapshot = render_agent_snapshot(values)
        used = turn_usage(values)
        outcome = endings.Outcome(
            content=snapshot.text,
            checkpoint_id=state.config["configurable"].get("checkpoint_id"),
            usage=used,
            tool_calls=len(snapshot.progress),
            spent=spent(self.turn, used, snapshot),
        )
        in_thread = [str(m.id) for m in values.get("messages", [])]
        return await endings.complete(
            pool,
            self.next(events),
            job_key=self.job_key,
            reply_id=self.turn.reply_id,
            outcome=outcome,
            in_thread=in_thread,
        )

    def next(self, events: EventSender) -> endings.Next:
        """Where the turn that waits behind this job goes once the job ends; a fork's or a
        regenerated dependent's end is announced, for the cascade that may wait for it."""
        turn = self.turn
        announce = turn.reply_id if turn.edit is not None or turn.replaces is not None else None
        return endings.Next(events, turn.chat_id, turn.assistant_id, announce)


async def fail_job(
    services: Services, events: EventSender, assistants: Assistants, job_key: str, data: object
) -> None:
    """After the last retry, or at once for a turn whose assistant this deployment no longer
    defines: the reply says so in plain words, and the chat's slot is free."""
    try:
        turn: Turn | None = Turn.model_validate(data)
    except ValidationError:
        turn = None  # not a turn's event: no chat to free
    then = endings.Next(events, turn.chat_id, turn.assistant_id) if turn is not None else None
    text, error = APOLOGY, "job_failed"
    if turn is not None and assistants.get(turn.assistant_id) is None:
        text, error = ASSISTANT_GONE, "assistant_not_found"
    pool = await services.pool()
    await endings.fail(pool, job_key=job_key, user_text=text, error=error, then=then)
