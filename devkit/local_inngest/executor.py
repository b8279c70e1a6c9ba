"""``LocalInngest``: the executor half of the server, and the handles tests hold."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import inngest
from starlette.types import ASGIApp

from devkit.local_inngest.driver import Driver
from devkit.local_inngest.intake import EventLog, Intake, normalize_event
from devkit.local_inngest.limits import Limits, stored_bytes
from devkit.local_inngest.runs import JSONDict, Run, RunRecord, error
from devkit.local_inngest.server import serve_asgi
from devkit.local_inngest.targets import Target, build_targets
from devkit.local_inngest.transport import Endpoint
from devkit.local_inngest.waits import WaitBook, WaitRecord

_log = logging.getLogger(__name__)

FUNCTION_CANCELLED_EVENT = "inngest/function.cancelled"
SCHEDULED_EVENT = "inngest/scheduled.timer"


class LocalInngest:
    def __init__(
        self,
        *,
        serve_url: str,
        signing_key: str,
        event_key: str,
        functions: Sequence[inngest.Function[Any]],
        app_id: str,
        retry_backoff: Sequence[float] = (0.05, 0.2, 1.0),
        request_timeout: float = 120.0,
        schedules: bool = True,
        limits: Limits | None = None,
        call_delay_s: float = 0.0,
    ) -> None:
        self.app_id = app_id
        self._endpoint = Endpoint(serve_url, signing_key, request_timeout)
        self.call_delay_s = call_delay_s
        self._targets = build_targets(functions, serve_url)
        # fnId is `<app_id>-<fn_id>`; a mismatch means the functions came from another client.
        strays = [t.fn_id for t in self._targets if not t.fn_id.startswith(f"{app_id}-")]
        if strays:
            raise ValueError(f"functions {strays} do not belong to app {app_id!r}")
        self._events = EventLog()
        self._runs: list[Run] = []
        # The driver task of every run that has not ended, cancelled runs included until
        # their in-flight request returns.
        self._live: dict[asyncio.Task[None], Run] = {}
        self._change = asyncio.Event()
        self._waits = WaitBook(self._changed)
        self.limits = limits or Limits()
        self._driver = Driver(
            self._endpoint, retry_backoff, self._waits, self._changed, self._emit, self.limits
        )
        self._schedules = schedules
        self._scheduler: asyncio.Task[None] | None = None
        self._intake = Intake(event_key, self._accept, lambda: self._endpoint.is_open)
        self.intake: ASGIApp = self._intake.app

    @property
    def call_delay_s(self) -> float:
        """Seconds slept before every call to the serve endpoint (Inngest reaching the app)."""
        return self._endpoint.delay_s

    @call_delay_s.setter
    def call_delay_s(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("call_delay_s cannot be negative")
        self._endpoint.delay_s = seconds

    async def start(self) -> None:
        self._endpoint.open()
        if self._schedules and self._scheduler is None and any(t.crons for t in self._targets):
            self._scheduler = asyncio.get_running_loop().create_task(self._run_schedules())

    async def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.cancel()
            await asyncio.gather(self._scheduler, return_exceptions=True)
            self._scheduler = None
        for task in list(self._live):
            task.cancel()
        await asyncio.gather(*self._live, return_exceptions=True)
        await self._endpoint.close()

    async def __aenter__(self) -> LocalInngest:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def serve_intake(
        self, sock: socket.socket | None = None
    ) -> contextlib.AbstractAsyncContextManager[str]:
        """Serve the intake on a loopback port; yields the origin for event_api_base_url."""
        return serve_asgi(self.intake, sock)

    async def wait_idle(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Return once every run has ended or is parked in ``step.wait_for_event``.

        Runs started meanwhile (on_failure handlers, ``inngest/function.cancelled``
        listeners) count too. A parked run does not keep this waiting: ``waiting()`` lists
        what it waits for; send that event, then call ``wait_idle()`` again. A cancelled
        run counts until the request it had in flight has returned."""
        await self.wait_for(self._idle, timeout)

    # A bounded default keeps a stuck run from hanging a test session silently.
    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Return once ``predicate()`` holds. It is evaluated now and again after each change
        the executor sees (a run starting, parking, resuming or ending; a wait registered or
        resolved), so it should read executor state such as ``runs()`` or ``waiting()``."""
        async with asyncio.timeout(timeout):
            while not predicate():
                await self._change.wait()

    async def wait_run(self, run_id: str, timeout: float = 30.0) -> RunRecord:  # noqa: ASYNC109
        """The run's record once it has completed, failed or been cancelled."""
        run = self._run(run_id)
        await self.wait_for(lambda: run.status != "running", timeout)
        return run.record()

    def runs(self) -> list[RunRecord]:
        return [r.record() for r in self._runs]

    def waiting(self) -> list[WaitRecord]:
        """The ``step.wait_for_event`` calls now waiting, oldest first."""
        return self._waits.records()

    def expire_waits(self, run_id: str | None = None) -> int:
        """Time out pending waits (of one run, or all) now, as if their timeout had passed:
        their steps return None. Returns how many there were."""
        return self._waits.expire(run_id)

    def send(self, event: Mapping[str, Any]) -> str:
        """Accept an event as the intake would (dedup included, no event key, never refused);
        ``event`` is ``{"name", "data"?, "id"?, "ts"?}``. Returns the event id."""
        normalized = normalize_event(dict(event))
        self._accept(normalized)
        return str(normalized["id"])

    def cancel(self, run_id: str) -> bool:
        """Cancel a run as Inngest's REST API does; False (and no change) if it had ended.

        No further request reaches the endpoint for it; a request already in flight finishes
        and its answer is ignored. Its waits are dropped, its status becomes ``cancelled``,
        and ``inngest/function.cancelled`` is emitted. ``KeyError`` for an unknown run."""
        run = self._run(run_id)
        if run.status != "running":
            return False
        self._cancel(run)
        return True

    async def replay(self, event_id: str, function_id: str | None = None) -> str:
        """Start a new run for a stored event, bypassing dedup; returns its run id."""
        event = self._events.get(event_id)
        targets = [t for t in self._targets if t.matches(event) and function_id in (None, t.fn_id)]
        if len(targets) != 1:
            raise ValueError(f"event {event_id!r} matches {len(targets)} functions")
        return self._start_run(targets[0], event)

    def event(self, event_id: str) -> JSONDict:
        """An accepted event, as runs receive it; ``KeyError`` for an unknown id."""
        return dict(self._events.get(event_id))

    def resume_recorded(self, event: Mapping[str, Any], memo: Mapping[str, Any]) -> str:
        """Start a run of a recorded `event` (normalized, with its id) whose memo already holds
        a recorded run's step outputs (``RunRecord.memo``), as a run in flight meets a new
        deploy: the build reaches the steps it memoized only if it names them as the recording
        did. Returns the run id. Not reproduced: the recorded run's attempt counters."""
        normalized = normalize_event(dict(event))
        [target] = [t for t in self._targets if t.matches(normalized)]
        return self._start_run(target, normalized, dict(memo))

    def fire(self, function_id: str) -> str:
        """Run a cron function now, as the dashboard's "Invoke" does; returns the run id."""
        [target] = [t for t in self._targets if t.fn_id == function_id and t.crons]
        return self._start_run(target, self._scheduled_event(target.crons[0][0]))

    def due(self, at: datetime) -> list[str]:
        """Ids of the functions whose cron schedule fires in the minute of `at` (UTC)."""
        return [t.fn_id for t in self._targets if any(c.matches(at) for _, c in t.crons)]

    def drop_step_output(self, step: str, times: int = 1) -> None:
        """Discard the SDK's answer for step `step` (display name, or FUNCTION_ATTEMPT_KEY for
        the run's final answer) the next `times` times it arrives, after the step has run:
        as if the process died before the executor memoized the result."""
        self._driver.drop_step_output(step, times)

    def refuse_events(self, count: int) -> None:
        """The next `count` event posts get 503 and are not accepted (an Inngest outage)."""
        self._intake.refuse(count)

    async def _run_schedules(self) -> None:
        while True:
            await asyncio.sleep(60 - time.time() % 60 + 0.001)
            for function_id in self.due(datetime.now(UTC)):
                self.fire(function_id)

    @staticmethod
    def _scheduled_event(expression: str) -> JSONDict:
        return normalize_event({"name": SCHEDULED_EVENT, "data": {"cron": expression}})

    def _run(self, run_id: str) -> Run:
        for run in self._runs:
            if run.run_id == run_id:
                return run
        raise KeyError(f"unknown run id {run_id!r}")

    def _changed(self) -> None:
        # Wakes every wait_for() at once; each re-checks its predicate on the next event.
        self._change.set()
        self._change = asyncio.Event()

    def _idle(self) -> bool:
        return all(run.parked and self._waits.pending(run) for run in self._live.values())

    def _accept(self, event: JSONDict) -> None:
        if not self._events.remember(event):
            return
        # Cancels and waits first: only runs that began before this event may hear it.
        for run in list(self._live.values()):
            if run.status == "running" and self._cancelled_by(run, event):
                self._cancel(run)
        self._waits.offer(event)
        for target in self._targets:
            if target.matches(event):
                self._start_run(target, event)

    def _start_run(self, target: Target, event: JSONDict, memo: JSONDict | None = None) -> str:
        if not self._endpoint.is_open:
            raise RuntimeError("LocalInngest.start() has not been awaited")
        # The run's state starts with its events (one here: no batching).
        run = Run(
            run_id=str(uuid.uuid4()),
            event=event,
            target=target,
            steps=memo or {},
            state_bytes=stored_bytes([event, *(memo or {}).values()]),
        )
        self._runs.append(run)
        task = asyncio.get_running_loop().create_task(self._driver.drive(run))
        self._live[task] = run
        task.add_done_callback(self._ended)
        self._changed()
        return run.run_id

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._live.pop(task, None)
        self._changed()

    def _cancelled_by(self, run: Run, event: JSONDict) -> bool:
        age = time.monotonic() - run.started
        return any(
            clause.cancels(run.event, event)
            and (clause.timeout_s is None or age <= clause.timeout_s)
            for clause in run.target.cancels
        )

    def _cancel(self, run: Run) -> None:
        run.status = "cancelled"
        run.stopped.set()
        self._waits.drop(run)
        self._changed()
        data = {
            "function_id": run.target.fn_id,
            "run_id": run.run_id,
            "error": error("Error", "function cancelled"),
            "event": run.event,
        }
        self._emit(FUNCTION_CANCELLED_EVENT, data)

    def _emit(self, name: str, data: JSONDict) -> None:
        self._accept(normalize_event({"name": name, "data": data}))
