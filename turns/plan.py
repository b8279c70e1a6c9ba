"""A round's plan: what the background function does next, as a step output (JSON), read from
the graph's state with no I/O."""

from __future__ import annotations

from collections.abc import Sequence
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


class Plan(TypedDict):
    """What the function does next, as a step output (JSON): kept small, since the run's state
    holds every plan. It names the calls to answer and the arguments of those that run."""

    done: bool
    pending: list[PlannedCall]
    # The job is no longer this run's (canceled, or taken over after the lease): stop quietly.
    stopped: NotRequired[bool]
    # An enqueued message's job: its turn has not begun, the first round starts it.
    opening: NotRequired[bool]
    # How many questions the turn has put to the user so far (MAX_QUESTIONS_PER_TURN).
    asked: NotRequired[int]
    # The user asked the job to pause: it does so before its next step (infra/store/pauses.py).
    pause: NotRequired[bool]
    # The round did not run, since a pause came first: it runs once the job is resumed
    # (Course.postponed). The key stays `held`: a plan is a step's output, memoized by runs in
    # flight.
    held: NotRequired[bool]


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
        return {"done": False, "pending": pending, "asked": questions_asked(messages, asking)}
    return {"done": AGENT_NODE not in state.next, "pending": []}


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
