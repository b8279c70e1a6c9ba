"""What a background job runs next: decided from what its steps returned, with no I/O.

`next_step` reads where the run is (a `Course`: the plan the last step returned and what the
run has counted) and returns the next step to run; functions/tool_handoff.py runs it and
moves the course on with `opened`, `round_ran`, `resumed` or `finalized`. As in pregel, where
`_algo` says what runs next and `_loop` runs it, the decision is a function of step outputs
alone, so a replay, which hands back the same outputs, takes the same course.

The ids here are the memo keys of runs in flight: each must stay as it is, byte for byte
(tests/functions/test_step_ids.py replays a run recorded with them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from infra.large_outputs import output_bound
from infra.settings import Settings
from turns.plan import Plan, PlannedCall
from turns.prompts import CallKind

OPENING_ROUND_ID = "model-round-opening"


@dataclass(frozen=True)
class Limits:
    """The settings a decision reads."""

    max_calls: int  # MAX_PARALLEL_TOOL_CALLS: calls past it in one round are refused
    max_questions: int  # MAX_QUESTIONS_PER_TURN
    round_budget_bytes: int  # what a round's tool outputs may take together

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            max_calls=settings.max_parallel_tool_calls,
            max_questions=settings.max_questions_per_turn,
            round_budget_bytes=settings.tool_round_budget_bytes,
        )


@dataclass(frozen=True)
class Course:
    """Where a run is: the plan its last step returned, and what it has counted so far."""

    plan: Plan
    rounds: int = 0  # model rounds that ran (a postponed one does not count)
    pauses: int = 0
    finals: int = 0  # finalize steps that found one more round needed
    postponed: bool = False  # the last model round did not run, since a pause came first


@dataclass(frozen=True)
class Stop:
    """The job is no longer this run's (canceled, or taken over after the lease)."""


@dataclass(frozen=True)
class Finalize:
    step_id: str


@dataclass(frozen=True)
class Pause:
    """The user asked for a pause: the run's `n`th."""

    n: int


@dataclass(frozen=True)
class Opening:
    """An enqueued turn's first round, which begins the turn."""

    step_id: str = OPENING_ROUND_ID


@dataclass(frozen=True)
class Ask:
    """A call put to the user before the round's tools run; a question past
    MAX_QUESTIONS_PER_TURN is refused instead (`refuse-question`)."""

    kind: Literal["question", "approval", "refuse-question"]
    call: PlannedCall


@dataclass(frozen=True)
class ToolRound:
    """The pending calls answered, then the model round `round_id` with their results.

    `asks` go first, one at a time, in the order of the calls; then each call in `running` is
    a step of its own, all in parallel, its output at most `bound` bytes; `refused` (past
    MAX_PARALLEL_TOOL_CALLS) get an error result in one step, `refuse_id`. The results go to
    the model in the order of `calls`, then those of `refused`."""

    calls: tuple[PlannedCall, ...]
    asks: tuple[Ask, ...]
    running: tuple[PlannedCall, ...]
    refused: tuple[PlannedCall, ...]
    bound: int
    refuse_id: str
    round_id: str


@dataclass(frozen=True)
class PostponedRound:
    """The round a pause postponed, run once resumed as a step of its own, with the same results."""

    round_id: str


Step = Stop | Finalize | Pause | Opening | ToolRound | PostponedRound


def next_step(course: Course, kinds: Mapping[str, CallKind], limits: Limits) -> Step:
    """The step after `course`. `kinds` says how each pending call is answered (by its id;
    a call it does not name runs as a tool)."""
    plan = course.plan
    if plan.opening:
        return Opening()
    if plan.done:
        if plan.stopped:
            return Stop()
        return Finalize(f"finalize-{course.finals}" if course.finals else "finalize")
    if plan.pause:
        return Pause(course.pauses + 1)
    if course.postponed:
        return PostponedRound(f"model-round-{course.rounds}-resumed-{course.pauses}")
    return tool_round(course, kinds, limits)


def tool_round(course: Course, kinds: Mapping[str, CallKind], limits: Limits) -> ToolRound:
    pending = course.plan.pending
    calls, refused = pending[: limits.max_calls], pending[limits.max_calls :]
    asked = course.plan.asked or 0
    asks: list[Ask] = []
    for call in calls:
        kind = kinds.get(call["id"], "tool")
        if kind == "question" and asked >= limits.max_questions:
            asks.append(Ask("refuse-question", call))
        elif kind == "question":
            asked += 1
            asks.append(Ask("question", call))
        elif kind == "approval":
            asks.append(Ask("approval", call))
    # Every question is answered by the user (or refused): its result is not a tool's.
    running = tuple(c for c in calls if kinds.get(c["id"], "tool") != "question")
    return ToolRound(
        calls=tuple(calls),
        asks=tuple(asks),
        running=running,
        refused=tuple(refused),
        # The round's outputs share its budget: each step's share follows from the plan alone.
        bound=output_bound(limits.round_budget_bytes, len(running)),
        refuse_id=f"refuse-calls-{course.rounds}",
        round_id=f"model-round-{course.rounds}",
    )


def opened(course: Course, plan: Plan) -> Course:
    """After the opening round: its plan (the turn's rounds are counted from 0 still)."""
    return replace(course, plan=plan)


def round_ran(course: Course, plan: Plan) -> Course:
    """After a model round's step: postponed by a pause, it runs again once resumed."""
    if plan.held:
        return replace(course, plan=plan, postponed=True)
    return replace(course, plan=plan, rounds=course.rounds + 1, postponed=False)


def resumed(course: Course, pause: Pause) -> Course:
    """After the pause `pause`, resumed: what it came before runs now."""
    return replace(course, plan=course.plan.resumed(), pauses=pause.n)


def finalized(course: Course) -> Course:
    """After a finalize that found a message steered in after the last round: one more."""
    return replace(course, plan=Plan.model_round(), finals=course.finals + 1)
