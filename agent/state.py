"""The agent's state: what a checkpoint holds."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

# Bump when a change to the state needs more than defaults to read an older checkpoint.
SCHEMA_VERSION = 1

AgentStatus = Literal["streaming", "needs_tool_handoff", "running_tools", "completed", "error"]
ToolStatus = Literal["pending", "completed", "error"]


class ToolInvocation(TypedDict):
    """One tool call of the model and how it went."""

    id: str
    name: str
    args: dict[str, Any]
    status: ToolStatus
    preview: NotRequired[str]


class AgentError(TypedDict):
    type: str
    message: str
    retriable: bool


def merge_invocations(
    left: list[ToolInvocation] | None, right: list[ToolInvocation] | None
) -> list[ToolInvocation]:
    """Reducer: invocations are updated by id, so applying the same result twice changes nothing."""
    merged = {inv["id"]: inv for inv in left or []}
    for inv in right or []:
        merged[inv["id"]] = {**merged.get(inv["id"], {}), **inv}  # type: ignore[typeddict-item]
    return list(merged.values())


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    status: NotRequired[AgentStatus]
    tool_invocations: NotRequired[Annotated[list[ToolInvocation], merge_invocations]]
    error: NotRequired[AgentError | None]
    schema_version: NotRequired[int]
