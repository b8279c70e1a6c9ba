"""What a background job runs next, from its steps' outputs alone: no database, no executor."""

from __future__ import annotations

import json
from typing import Any

from turns.course import (
    Ask,
    Course,
    Finalize,
    Limits,
    Opening,
    Pause,
    PostponedRound,
    Stop,
    ToolRound,
    finalized,
    next_step,
    opened,
    resumed,
    round_ran,
)
from turns.plan import Plan, PlannedCall
from turns.prompts import CallKind

LIMITS = Limits(max_calls=3, max_questions=1, round_budget_bytes=300_000)


def call(n: int, name: str = "calc") -> PlannedCall:
    return {"id": f"call_{n}", "name": name, "args": {"input": str(n)}}


def step(at: Course, kinds: dict[str, CallKind] | None = None) -> Any:
    return next_step(at, kinds or {}, LIMITS)


def test_a_plan_with_calls_runs_them_then_the_round() -> None:
    at = Course(plan=Plan.tools([call(0), call(1)], asked=0))
    decided = step(at)
    assert isinstance(decided, ToolRound)
    assert decided.running == (call(0), call(1))
    assert (decided.asks, decided.refused) == ((), ())
    assert (decided.round_id, decided.refuse_id) == ("model-round-0", "refuse-calls-0")
    # Two outputs share the round's budget.
    assert decided.bound == 150_000


def test_rounds_are_counted_in_the_ids_of_later_rounds() -> None:
    at = Course(plan=Plan.tools([call(0)], asked=0))
    at = round_ran(at, Plan.tools([call(1)], asked=0))
    at = round_ran(at, Plan.tools([call(2)], asked=0))
    assert step(at).round_id == "model-round-2"


def test_calls_past_the_limit_are_refused_and_share_nothing() -> None:
    pending = [call(n) for n in range(5)]
    decided = step(Course(plan=Plan.tools(pending, asked=0), rounds=1))
    assert decided.calls == tuple(pending[:3])
    assert decided.refused == tuple(pending[3:])
    assert decided.refuse_id == "refuse-calls-1"
    assert decided.bound == 100_000


def test_the_user_is_asked_first_in_the_order_of_the_calls() -> None:
    pending = [call(0, "send_email"), call(1, "ask_user"), call(2, "ask_user")]
    kinds: dict[str, CallKind] = {"call_0": "approval", "call_1": "question", "call_2": "question"}
    decided = step(Course(plan=Plan.tools(pending, asked=0)), kinds)
    # One question per turn (LIMITS): the second is refused, never put to the user.
    assert decided.asks == (
        Ask("approval", pending[0]),
        Ask("question", pending[1]),
        Ask("refuse-question", pending[2]),
    )
    # A question's result is the user's answer: only the call to approve runs as a tool.
    assert decided.running == (pending[0],)
    assert decided.bound == 256 * 1024  # one output: at most what any step output may take


def test_questions_asked_earlier_in_the_turn_count() -> None:
    pending = [call(0, "ask_user")]
    decided = step(Course(plan=Plan.tools(pending, asked=1)), {"call_0": "question"})
    assert decided.asks == (Ask("refuse-question", pending[0]),)
    assert decided.running == ()


def test_a_pause_comes_before_the_rounds_tools() -> None:
    at = Course(plan=Plan.tools([call(0)], asked=0).paused(), pauses=1)
    assert step(at) == Pause(2)
    at = resumed(at, Pause(2))
    assert at.pauses == 2
    assert step(at).round_id == "model-round-0"


def test_a_round_held_by_a_pause_runs_again_as_a_step_of_its_own() -> None:
    at = Course(plan=Plan.tools([call(0)], asked=0), rounds=1)
    at = round_ran(at, Plan.postponed())
    assert at.rounds == 1
    assert step(at) == Pause(1)
    at = resumed(at, Pause(1))
    assert step(at) == PostponedRound("model-round-1-resumed-1")
    # Held again: another pause, and the round's next id.
    at = round_ran(at, Plan.postponed())
    at = resumed(at, step(at))
    assert step(at) == PostponedRound("model-round-1-resumed-2")
    at = round_ran(at, Plan.finished())
    assert (at.rounds, at.postponed) == (2, False)
    assert step(at) == Finalize("finalize")


def test_a_finalize_that_finds_a_steered_message_runs_one_more_round() -> None:
    at = finalized(Course(plan=Plan.finished(), rounds=2))
    decided = step(at)
    assert isinstance(decided, ToolRound)
    assert (decided.calls, decided.round_id) == ((), "model-round-2")
    at = round_ran(at, Plan.finished())
    assert step(at) == Finalize("finalize-1")


def test_a_stopped_plan_stops() -> None:
    assert step(Course(plan=Plan.stop())) == Stop()


def test_an_enqueued_turn_opens_first() -> None:
    at = Course(plan=Plan.first_round())
    assert step(at) == Opening("model-round-opening")
    at = opened(at, Plan.tools([call(0)], asked=0))
    assert step(at).round_id == "model-round-0"


def test_each_plan_is_the_step_output_runs_in_flight_memoized() -> None:
    # The keys and their order are those recorded runs replay (tests/functions/test_step_ids.py).
    shapes = [
        (
            Plan.tools([call(0)], asked=1).paused(),
            {"done": False, "pending": [call(0)], "asked": 1, "pause": True},
        ),
        (Plan.model_round(), {"done": False, "pending": []}),
        (Plan.finished(), {"done": True, "pending": []}),
        (Plan.stop(), {"done": True, "pending": [], "stopped": True}),
        (Plan.first_round(), {"done": False, "pending": [], "opening": True}),
        (Plan.postponed(), {"done": False, "pending": [], "pause": True, "held": True}),
    ]
    for plan, memoized in shapes:
        assert json.dumps(plan.to_json()) == json.dumps(memoized)
        assert Plan.from_json(plan.to_json()) == plan
