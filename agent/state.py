"""The agent's state: what a checkpoint holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

# Every checkpoint records the version that wrote it (checkpoint metadata `schema_version`).
# Additive changes to the state keep the version: defaults fill what older checkpoints lack.
# Bump it for a change that needs more than defaults, and raise OLDEST_READABLE_SCHEMA_VERSION
# past the versions this code can no longer read.
SCHEMA_VERSION = 1
OLDEST_READABLE_SCHEMA_VERSION = 1

AgentStatus = Literal["streaming", "needs_tool_handoff", "running_tools", "completed"]
ToolStatus = Literal["pending", "completed", "error"]
# Why an answer ended before the model finished it: the stream ended with no stop reason, the
# output limit, the provider's content filter, or the time one answer may stream (`time`).
CutShort = Literal["incomplete", "length", "content_filter", "time"]


class ToolInvocation(TypedDict):
    """One tool call of the model and how it went."""

    id: str
    name: str
    args: dict[str, Any]
    status: ToolStatus
    preview: NotRequired[str]
    # What the user should know about the result: cut short, a preview, stopped after its time.
    note: NotRequired[str]


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
    # Set on the round whose answer was cut short, None on every other.
    cut_short: NotRequired[CutShort | None]
    schema_version: NotRequired[int]
    # What the user asked for when they resumed a paused answer: every later model call of the
    # turn gets it (agent/graph.py); the next turn's opening input clears it.
    instruction: NotRequired[str | None]


def readable_schema(version: int) -> bool:
    """Whether this code can resume a checkpoint written by `version` (a newer one may hold
    state this code does not know; an older one, state it no longer knows how to read)."""
    return OLDEST_READABLE_SCHEMA_VERSION <= version <= SCHEMA_VERSION


def checkpoint_schema(metadata: Mapping[str, Any] | None) -> int:
    """The version that wrote a checkpoint; those from before versions were recorded are 1."""
    version = (metadata or {}).get("schema_version", 1)
    return version if isinstance(version, int) else -1


class IncompatibleCheckpoint(RuntimeError):
    """The thread's checkpoint was written by a schema version this build cannot read."""


def check_version(metadata: Mapping[str, Any] | None, checkpoint_id: str | None) -> None:
    """IncompatibleCheckpoint unless this build can resume the checkpoint `checkpoint_id`,
    whose metadata is `metadata`."""
    version = checkpoint_schema(metadata)
    if not readable_schema(version):
        raise IncompatibleCheckpoint(
            f"checkpoint {checkpoint_id} was written by schema version {version}; this build"
            f" reads {OLDEST_READABLE_SCHEMA_VERSION} to {SCHEMA_VERSION}"
        )
