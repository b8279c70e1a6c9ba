"""Token usage of a turn, from what each model call reported (`usage_metadata`)."""

from __future__ import annotations

from typing import TypedDict

from langchain_core.messages import AIMessage

from agent.graph import current_turn
from agent.state import AgentState


class Tokens(TypedDict):
    input: int
    output: int


class TurnUsage(TypedDict):
    """What a reply's `metadata.usage` holds: each model call of the turn, and their sum."""

    rounds: list[Tokens]
    input: int
    output: int


def turn_usage(state: AgentState) -> TurnUsage:
    """The usage of every model call of the current turn that reported one."""
    rounds: list[Tokens] = [
        {"input": m.usage_metadata["input_tokens"], "output": m.usage_metadata["output_tokens"]}
        for m in current_turn(state["messages"])
        if isinstance(m, AIMessage) and m.usage_metadata
    ]
    return {
        "rounds": rounds,
        "input": sum(r["input"] for r in rounds),
        "output": sum(r["output"] for r in rounds),
    }
