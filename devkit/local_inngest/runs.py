"""What the executor knows about a run, and the public record tests read back."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from typing import Any, Literal

from devkit.local_inngest.targets import Target

RunStatus = Literal["running", "completed", "failed", "cancelled"]
JSONDict = dict[str, Any]

# RunRecord.attempts key for requests that ended the run (200/500) rather than a step.
FUNCTION_ATTEMPT_KEY = "$function"


@dataclasses.dataclass(frozen=True)
class RunRecord:
    run_id: str
    event_id: str
    function_id: str
    status: RunStatus
    output: Any = None
    error: Mapping[str, Any] | None = None
    # Step display name (or FUNCTION_ATTEMPT_KEY) -> attempts used by its final outcome.
    attempts: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # The run's state as Inngest counts it (its event and every stored step output), and each
    # stored step's share of it by display name, in bytes (see ``limits``).
    state_bytes: int = 0
    step_bytes: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # Each stored step as (display name, opcode), in the order the executor stored them (a
    # retried step once per outcome stored), and the memo the SDK receives: hashed id -> stored
    # output. Together they are a recording a later build can be replayed against.
    ops: tuple[tuple[str, str], ...] = ()
    memo: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(eq=False)
class Run:
    run_id: str
    event: JSONDict
    target: Target
    status: RunStatus = "running"
    output: Any = None
    error: JSONDict | None = None
    attempts: dict[str, int] = dataclasses.field(default_factory=dict)
    # Insertion order doubles as the memo stack the SDK receives.
    steps: JSONDict = dataclasses.field(default_factory=dict)
    state_bytes: int = 0
    step_bytes: dict[str, int] = dataclasses.field(default_factory=dict)
    ops: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    # Monotonic start, for cancel clauses with a timeout.
    started: float = dataclasses.field(default_factory=time.monotonic)
    # The driver has nothing to do but await wait_for_event outputs.
    parked: bool = False
    # Set on cancellation, to cut a retry backoff short.
    stopped: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def record(self) -> RunRecord:
        return RunRecord(
            run_id=self.run_id,
            event_id=str(self.event["id"]),
            function_id=self.target.fn_id,
            status=self.status,
            output=self.output,
            error=dict(self.error) if self.error is not None else None,
            attempts=dict(self.attempts),
            state_bytes=self.state_bytes,
            step_bytes=dict(self.step_bytes),
            ops=tuple(self.ops),
            memo=dict(self.steps),
        )


class AbortRunError(Exception):
    """The executor cannot continue this run faithfully; fails it without on_failure."""


def error(name: str, message: str, stack: str | None = None) -> JSONDict:
    return {"name": name, "message": message, "stack": stack}


def error_from(raw: object) -> JSONDict:
    src = raw if isinstance(raw, dict) else {}
    return error(str(src.get("name", "Error")), str(src.get("message", raw)), src.get("stack"))
