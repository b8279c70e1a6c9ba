"""Steps parked in ``step.wait_for_event`` until a matching event, their timeout or the run's end.

A wait exists from the moment the executor reads the SDK's ``WaitForEvent`` op, so only
events accepted after that can resolve it, as on Inngest. Its output, memoized as Inngest
memoizes it (not nested under ``data``), is the matching event or null on timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from devkit.local_inngest.expressions import (
    Match,
    UnsupportedExpression,
    compile_match,
    parse_duration,
)
from devkit.local_inngest.runs import AbortRunError, JSONDict, Run


@dataclasses.dataclass(frozen=True)
class WaitRecord:
    """A pending ``step.wait_for_event``, as ``LocalInngest.waiting()`` lists it."""

    run_id: str
    function_id: str
    # The id given to wait_for_event, and the hashed id its output is memoized under.
    step: str
    step_id: str
    event: str
    expression: str | None
    expires_at: datetime


@dataclasses.dataclass(eq=False)
class _Wait:
    run: Run
    record: WaitRecord
    match: Match | None
    future: asyncio.Future[JSONDict | None]
    timer: asyncio.TimerHandle | None = None


class WaitBook:
    """Every pending wait of every run; ``on_change`` hears each registration and resolution."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change
        self._waits: list[_Wait] = []

    def park(self, run: Run, op: JSONDict) -> asyncio.Future[JSONDict | None]:
        """Register the wait an SDK ``WaitForEvent`` op asks for; its future gets the output."""
        step = str(op.get("displayName") or op.get("id"))
        raw_opts = op.get("opts")
        opts: JSONDict = raw_opts if isinstance(raw_opts, dict) else {}
        event, expression, timeout = op.get("name"), opts.get("if"), opts.get("timeout")
        if not isinstance(event, str) or not isinstance(timeout, str):
            raise AbortRunError(f"step {step!r}: WaitForEvent op without event name or timeout")
        try:
            match = None if not expression else compile_match(str(expression))
            timeout_s = parse_duration(timeout)
        except UnsupportedExpression as err:
            raise AbortRunError(f"step {step!r} waits for {event!r}: {err}") from err
        loop = asyncio.get_running_loop()
        record = WaitRecord(
            run_id=run.run_id,
            function_id=run.target.fn_id,
            step=step,
            step_id=str(op["id"]),
            event=event,
            expression=str(expression) if expression else None,
            expires_at=datetime.now(UTC) + timedelta(seconds=timeout_s),
        )
        wait = _Wait(run, record, match, loop.create_future())
        wait.timer = loop.call_later(timeout_s, self._resolve, wait, None)
        self._waits.append(wait)
        self._on_change()
        return wait.future

    def offer(self, event: JSONDict) -> None:
        """Resolve, with ``event``, every pending wait it matches (in any number of runs)."""
        for wait in list(self._waits):
            if wait.record.event == event["name"] and (
                wait.match is None or wait.match(wait.run.event, event)
            ):
                self._resolve(wait, event)

    def expire(self, run_id: str | None = None) -> int:
        """Time out the pending waits (of one run, or all) now; returns how many."""
        due = [w for w in self._waits if run_id in (None, w.run.run_id)]
        for wait in due:
            self._resolve(wait, None)
        return len(due)

    def drop(self, run: Run) -> None:
        """Forget the run's waits: it ended or was cancelled, nobody reads their output."""
        for wait in [w for w in self._waits if w.run is run]:
            self._resolve(wait, None)

    def pending(self, run: Run) -> bool:
        return any(w.run is run for w in self._waits)

    def records(self) -> list[WaitRecord]:
        return [w.record for w in self._waits]

    def _resolve(self, wait: _Wait, output: JSONDict | None) -> None:
        if wait not in self._waits:
            return
        self._waits.remove(wait)
        if wait.timer is not None:
            wait.timer.cancel()
        if not wait.future.done():
            wait.future.set_result(output)
        self._on_change()
