"""A round's plan: what the background function does next, as a step output (JSON), read from
the graph's state with no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NotRequired, TypedDict

from langchain_core.messages import AnyMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import StateSnapshot

from agent.graph import AGENT_NODE, TOOLS_NODE, current_turn, pending_tool_calls
from agent.tools import asks_user


class PlannedCall(TypedDict):
    """A tool call as a plan carries it: its id and name, and its args unless it is past
    MAX_PARALLEL_TOOL_CALLS (such a call is answered without running: turns/course.py)."""

    id: str
    name: str
    args: NotRequired[dict[str, Any]]


class PlanJson(TypedDict):
    """A plan as a step returns it (JSON): kept small, since the run's state holds every plan.
    Runs in flight memoized this shape, so its keys and their order stay as they are."""

    done: bool
    pending: list[PlannedCall]
    stopped: NotRequired[bool]
    opening: NotRequired[bool]
    asked: NotRequired[int]
    pause: NotRequired[bool]
    held: NotRequired[bool]


@dataclass(frozen=True)
class Plan:
    """What the function does next: the calls to answer, with the arguments of those that run,
    or the turn's end. Made by its named constructors; `to_json` is the step output."""

    done: bool
    pending: tuple[PlannedCall, ...] = ()
    # The job is no longer this run's (canceled, or taken over after the lease): stop quietly.
    stopped: bool = False
    # An enqueued message's job: its turn has not begun, the first round starts it.
    opening: bool = False
    # How many questions the turn has put to the user so far (MAX_QUESTIONS_PER_TURN); None
    # where the plan has no calls.
    asked: int | None = None
    # The user asked the job to pause: it does so before its next step (infra/store/pauses.py).
    pause: bool = False
    # The round did not run, since a pause came first: it runs once the job is resumed
    # (Course.postponed).
    held: bool = False

    @classmethod
    def tools(cls, pending: Sequence[PlannedCall], *, asked: int) -> Plan:
        """The round's pending calls, answered next."""
        return cls(done=False, pending=tuple(pending), asked=asked)

    @classmethod
    def model_round(cls) -> Plan:
        """Another model round, with no calls to answer first."""
        return cls(done=False)

    @classmethod
    def finished(cls) -> Plan:
        """The turn's answer is complete: finalize."""
        return cls(done=True)

    @classmethod
    def stop(cls) -> Plan:
        """The job is no longer this run's."""
        return cls(done=True, stopped=True)

    @classmethod
    def first_round(cls) -> Plan:
        """An enqueued turn, begun by its opening round."""
        return cls(done=False, opening=True)

    @classmethod
    def postponed(cls) -> Plan:
        """A round a pause came before: pause, then run it."""
        return cls(done=False, pause=True, held=True)

    def paused(self) -> Plan:
        """This plan, after the pause the user asked for."""
        return replace(self, pause=True)

    def resumed(self) -> Plan:
        """This plan, once its pause is over."""
        return replace(self, pause=False)

    def to_json(self) -> PlanJson:
        """The step output, with the keys a plan has, in the order runs in flight memoized."""
        out = PlanJson(done=self.done, pending=list(self.pending))
        if self.stopped:
            out["stopped"] = True
        if self.opening:
            out["opening"] = True
        if self.asked is not None:
            out["asked"] = self.asked
        if self.pause:
            out["pause"] = True
        if self.held:
            out["held"] = True
        return out

    @classmethod
    def from_json(cls, out: PlanJson) -> Plan:
        """The plan a step returned (or a memoized run's output)."""
        return cls(
            done=out["done"],
            pending=tuple(out["pending"]),
            stopped=out.get("stopped", False),
            opening=out.get("opening", False),
            asked=out.get("asked"),
            pause=out.get("pause", False),
            held=out.get("held", False),
        )


def planned(call: ToolCall, *, with_args: bool) -> PlannedCall:
    # The model gives every call an id: a pending call is one without a ToolMessage for it.
    carried = PlannedCall(id=str(call["id"]), name=call["name"])
    if with_args:
        carried["args"] = call["args"]
    return carried


def plan_from(state: StateSnapshot, max_calls: int, asking: frozenset[str] = frozenset()) -> Plan:
    """The plan after `state`, with the arguments of the first `max_calls` calls only;
    `asking` names the tools that put a question to the user."""
    if TOOLS_NODE in state.next:
        messages = state.values["messages"]
        calls = pending_tool_calls(messages)
        pending = [planned(c, with_args=n < max_calls) for n, c in enumerate(calls)]
        return Plan.tools(pending, asked=questions_asked(messages, asking))
    return Plan.model_round() if AGENT_NODE in state.next else Plan.finished()


def asking_tools(tools: Sequence[BaseTool]) -> frozenset[str]:
    """The names of the tools whose calls are questions to the user."""
    return frozenset(t.name for t in tools if asks_user(t))


def questions_asked(messages: Sequence[AnyMessage], asking: frozenset[str]) -> int:
    """The questions of the current turn that were put to the user (not those refused)."""
    return sum(
        1
        for m in current_turn(messages)
        if isinstance(m, ToolMessage) and m.name in asking and m.status != "error"
    )
