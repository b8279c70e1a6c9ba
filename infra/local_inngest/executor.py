"""``LocalInngest``: the executor half of the server, and the handles tests hold."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import inngest
from starlette.types import ASGIApp

from infra.local_inngest.expressions import lookup
from infra.local_inngest.intake import EventLog, Intake, normalize_event
from infra.local_inngest.runs import (
    FUNCTION_ATTEMPT_KEY,
    AbortRunError,
    JSONDict,
    Run,
    RunRecord,
    error,
    error_from,
)
from infra.local_inngest.server import serve_asgi
from infra.local_inngest.targets import Target, build_targets
from infra.local_inngest.transport import Endpoint, Reply, transport_error

_log = logging.getLogger(__name__)

FUNCTION_FAILED_EVENT = "inngest/function.failed"
SCHEDULED_EVENT = "inngest/scheduled.timer"
# Guards against an SDK/executor disagreement looping forever.
_MAX_DISCOVERIES = 1000


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
    ) -> None:
        if not retry_backoff:
            raise ValueError("retry_backoff needs at least one delay")
        self.app_id = app_id
        self._backoff = tuple(retry_backoff)
        self._endpoint = Endpoint(serve_url, signing_key, request_timeout)
        self._targets = build_targets(functions, serve_url)
        # fnId is `<app_id>-<fn_id>`; a mismatch means the functions came from another client.
        strays = [t.fn_id for t in self._targets if not t.fn_id.startswith(f"{app_id}-")]
        if strays:
            raise ValueError(f"functions {strays} do not belong to app {app_id!r}")
        self._events = EventLog()
        self._runs: list[Run] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._schedules = schedules
        self._scheduler: asyncio.Task[None] | None = None
        self._dropped_outputs: dict[str, int] = {}
        self._intake = Intake(event_key, self._accept, lambda: self._endpoint.is_open)
        self.intake: ASGIApp = self._intake.app

    async def start(self) -> None:
        self._endpoint.open()
        if self._schedules and self._scheduler is None and any(t.crons for t in self._targets):
            self._scheduler = asyncio.get_running_loop().create_task(self._run_schedules())

    async def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.cancel()
            await asyncio.gather(self._scheduler, return_exceptions=True)
            self._scheduler = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
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

    # A bounded default keeps a stuck run from hanging a test session silently.
    async def wait_idle(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Return once no run is queued or running; on_failure runs are included."""
        async with asyncio.timeout(timeout):
            while self._tasks:
                await asyncio.wait(set(self._tasks))

    def runs(self) -> list[RunRecord]:
        return [r.record() for r in self._runs]

    async def replay(self, event_id: str, function_id: str | None = None) -> str:
        """Start a new run for a stored event, bypassing dedup; returns its run id."""
        event = self._events.get(event_id)
        targets = [t for t in self._targets if t.matches(event) and function_id in (None, t.fn_id)]
        if len(targets) != 1:
            raise ValueError(f"event {event_id!r} matches {len(targets)} functions")
        return self._start_run(targets[0], event)

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
        self._dropped_outputs[step] = self._dropped_outputs.get(step, 0) + times

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

    def _accept(self, event: JSONDict) -> None:
        if not self._events.remember(event):
            return
        for target in self._targets:
            if target.matches(event):
                self._start_run(target, event)

    def _start_run(self, target: Target, event: JSONDict) -> str:
        if not self._endpoint.is_open:
            raise RuntimeError("LocalInngest.start() has not been awaited")
        run = Run(run_id=str(uuid.uuid4()), event=event, target=target)
        self._runs.append(run)
        task = asyncio.get_running_loop().create_task(self._guarded(run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run.run_id

    async def _guarded(self, run: Run) -> None:
        try:
            await self._drive(run)
        except AbortRunError as err:
            _log.error("run %s (%s) aborted: %s", run.run_id, run.target.fn_id, err)
            run.status, run.error = "failed", error("LocalInngestUnsupported", str(err))
        except Exception as err:
            # A crashed driver must still end the run, or wait_idle() would hang.
            _log.exception("run %s (%s) crashed", run.run_id, run.target.fn_id)
            run.status, run.error = "failed", error("LocalInngestInternalError", repr(err))

    async def _drive(self, run: Run) -> None:
        disable_immediate = False
        for _ in range(_MAX_DISCOVERIES):
            reply, attempt = await self._job(run, None, disable_immediate)
            if reply.kind != "ops":
                return self._finish(run, reply, attempt)
            planned = [op for op in reply.body if op.get("op") == "StepPlanned"]
            for op in reply.body:
                if op.get("op") != "StepPlanned":
                    self._memoize(run, op, attempt)
            if planned:
                results = await asyncio.gather(
                    *(self._job(run, str(op.get("id")), False) for op in planned)
                )
                for sub, sub_attempt in results:
                    if sub.kind != "ops":
                        return self._finish(run, sub, sub_attempt)
                    for op in sub.body:
                        self._memoize(run, op, sub_attempt)
                # Like the real executor: after planning, new steps are planned, not run inline.
                disable_immediate = True
        raise AbortRunError(f"no completion after {_MAX_DISCOVERIES} discovery requests")

    async def _job(
        self, run: Run, step_id: str | None, disable_immediate: bool
    ) -> tuple[Reply, int]:
        attempt = 0
        while True:
            reply = await self._endpoint.call(
                run, step_id, attempt, disable_immediate, self._concurrency(run)
            )
            if self._drop_output(reply):
                reply = transport_error("output dropped")
            if not reply.retriable or attempt + 1 >= run.target.max_attempts:
                return reply, attempt
            if reply.kind == "transport":
                _log.warning("run %s attempt %d: %s", run.run_id, attempt, reply.body["message"])
            await asyncio.sleep(self._backoff[min(attempt, len(self._backoff) - 1)])
            attempt += 1

    def _memoize(self, run: Run, op: JSONDict, attempt: int) -> None:
        kind, name = op.get("op"), str(op.get("displayName") or op.get("id"))
        if kind == "StepRun":
            run.steps[str(op["id"])] = {"data": op.get("data")}
        elif kind in ("StepError", "StepFailed"):
            run.steps[str(op["id"])] = {"error": error_from(op.get("error"))}
        else:
            raise AbortRunError(
                f"step {name!r} uses opcode {kind!r}, which LocalInngest does not run"
            )
        run.attempts[name] = attempt + 1

    def _finish(self, run: Run, reply: Reply, attempt: int) -> None:
        run.attempts[FUNCTION_ATTEMPT_KEY] = attempt + 1
        if reply.kind == "done":
            run.status, run.output = "completed", reply.body
            return
        run.status = "failed"
        run.error = reply.body if reply.kind == "transport" else error_from(reply.body)
        if not run.target.is_failure_handler:
            data = {
                "function_id": run.target.fn_id,
                "run_id": run.run_id,
                "error": run.error,
                "event": run.event,
            }
            self._accept(normalize_event({"name": FUNCTION_FAILED_EVENT, "data": data}))

    @contextlib.asynccontextmanager
    async def _concurrency(self, run: Run) -> AsyncIterator[None]:
        keys = []
        for c in run.target.concurrency:
            scope = run.target.fn_id if c.scope in (None, "fn") else c.scope
            value = lookup(run.event, c.key) if c.key else None
            key = json.dumps([scope, c.key, c.limit, value], sort_keys=True, default=str)
            self._slots.setdefault(key, asyncio.Semaphore(c.limit))
            keys.append(key)
        async with contextlib.AsyncExitStack() as stack:
            # A global acquisition order keeps overlapping key sets deadlock-free.
            for key in sorted(keys):
                await stack.enter_async_context(self._slots[key])
            yield

    def _drop_output(self, reply: Reply) -> bool:
        if reply.kind == "ops":
            names = [
                str(op.get("displayName") or op.get("id"))
                for op in reply.body
                if op.get("op") == "StepRun"
            ]
        else:
            names = [FUNCTION_ATTEMPT_KEY] if reply.kind == "done" else []
        for name in names:
            if self._dropped_outputs.get(name, 0) > 0:
                self._dropped_outputs[name] -= 1
                _log.warning("dropping the output of step %r (fault injection)", name)
                return True
        return False
