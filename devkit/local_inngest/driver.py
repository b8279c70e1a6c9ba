"""The run driver: discovery requests, planned steps, retries, waits and their memos."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence

from devkit.local_inngest.expressions import lookup
from devkit.local_inngest.limits import (
    LimitExceeded,
    Limits,
    function_overflowed,
    state_overflowed,
    step_output_error,
    stored_bytes,
)
from devkit.local_inngest.runs import (
    FUNCTION_ATTEMPT_KEY,
    AbortRunError,
    JSONDict,
    Run,
    error,
    error_from,
)
from devkit.local_inngest.transport import Endpoint, Reply, transport_error
from devkit.local_inngest.waits import WaitBook

_log = logging.getLogger(__name__)

FUNCTION_FAILED_EVENT = "inngest/function.failed"
# Guards against an SDK/executor disagreement looping forever; above any step limit, which
# ends a run first (Inngest's absolute maximum is 10,000 steps).
_MAX_DISCOVERIES = 10_000


class _Cancelled(Exception):
    """The run was cancelled: its driver stops without touching the run again."""


class Driver:
    """Runs' conversations with the serve endpoint, one task per run (``drive``)."""

    def __init__(
        self,
        endpoint: Endpoint,
        backoff: Sequence[float],
        waits: WaitBook,
        changed: Callable[[], None],
        emit: Callable[[str, JSONDict], None],
        limits: Limits,
    ) -> None:
        if not backoff:
            raise ValueError("retry_backoff needs at least one delay")
        self._limits = limits
        self._endpoint = endpoint
        self._backoff = tuple(backoff)
        self._waits = waits
        self._changed = changed
        self._emit = emit
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._dropped_outputs: dict[str, int] = {}

    def drop_step_output(self, step: str, times: int) -> None:
        self._dropped_outputs[step] = self._dropped_outputs.get(step, 0) + times

    @staticmethod
    def _check_live(run: Run) -> None:
        if run.status == "cancelled":
            raise _Cancelled

    async def drive(self, run: Run) -> None:
        """Drive ``run`` until it completes, fails or is cancelled; never raises."""
        try:
            await self._steps(run)
        except _Cancelled:
            _log.info("run %s (%s) cancelled", run.run_id, run.target.fn_id)
        except AbortRunError as err:
            _log.error("run %s (%s) aborted: %s", run.run_id, run.target.fn_id, err)
            self._fail(run, error("LocalInngestUnsupported", str(err)))
        except LimitExceeded as exceeded:
            _log.error("run %s (%s) failed: %s", run.run_id, run.target.fn_id, exceeded)
            if run.status == "running":
                self._failed(run, exceeded.error)
        except Exception as err:
            # A crashed driver must still end the run, or wait_idle() would hang.
            _log.exception("run %s (%s) crashed", run.run_id, run.target.fn_id)
            self._fail(run, error("LocalInngestInternalError", repr(err)))
        finally:
            self._waits.drop(run)

    @staticmethod
    def _fail(run: Run, err: JSONDict) -> None:
        # A cancellation that came first stands.
        if run.status == "running":
            run.status, run.error = "failed", err

    async def _steps(self, run: Run) -> None:
        disable_immediate = False
        for _ in range(_MAX_DISCOVERIES):
            reply, attempt = await self._job(run, None, disable_immediate)
            if reply.kind != "ops":
                return self._finish(run, reply, attempt)
            planned: list[JSONDict] = []
            waits: list[tuple[JSONDict, asyncio.Future[JSONDict | None]]] = []
            for op in reply.body:
                if op.get("op") == "StepPlanned":
                    planned.append(op)
                elif op.get("op") == "WaitForEvent":
                    # Registered now, before any planned step runs: events from here on count.
                    waits.append((op, self._waits.park(run, op)))
                else:
                    self._memoize(run, op, attempt)
            if planned:
                results = await asyncio.gather(
                    *(self._job(run, str(op.get("id")), False) for op in planned),
                    return_exceptions=True,
                )
                # Every sibling request has returned by now; a cancellation outranks errors.
                self._check_live(run)
                for result in results:
                    if isinstance(result, BaseException):
                        raise result
                    sub, sub_attempt = result
                    if sub.kind != "ops":
                        return self._finish(run, sub, sub_attempt)
                    for op in sub.body:
                        self._memoize(run, op, sub_attempt)
                # Like the real executor: after planning, new steps are planned, not run inline.
                disable_immediate = True
            if waits:
                await self._park(run, [future for _, future in waits])
                for op, future in waits:
                    name = str(op.get("displayName") or op.get("id"))
                    self._store(run, str(op["id"]), name, future.result(), check=False)
                    run.ops.append((name, str(op.get("op"))))
                    run.attempts[name] = attempt + 1
        raise AbortRunError(f"no completion after {_MAX_DISCOVERIES} discovery requests")

    async def _job(
        self, run: Run, step_id: str | None, disable_immediate: bool
    ) -> tuple[Reply, int]:
        attempt = 0
        while True:
            self._check_live(run)
            if len(run.steps) >= self._limits.steps:
                raise function_overflowed(self._limits)
            reply = await self._endpoint.call(
                run, step_id, attempt, disable_immediate, self._concurrency(run)
            )
            self._check_live(run)
            if self._drop_output(reply):
                reply = transport_error("output dropped")
            reply = self._validated(reply)
            if not reply.retriable or attempt + 1 >= run.target.max_attempts:
                return reply, attempt
            if reply.kind == "transport":
                _log.warning("run %s attempt %d: %s", run.run_id, attempt, reply.body["message"])
            with contextlib.suppress(TimeoutError):
                delay = self._backoff[min(attempt, len(self._backoff) - 1)]
                await asyncio.wait_for(run.stopped.wait(), delay)
            attempt += 1

    async def _park(self, run: Run, futures: Sequence[asyncio.Future[JSONDict | None]]) -> None:
        run.parked = True
        self._changed()
        try:
            await asyncio.gather(*futures)
        finally:
            run.parked = False
        self._check_live(run)

    def _validated(self, reply: Reply) -> Reply:
        """The reply as Inngest takes it: more planned steps than a run may have end the run;
        a step output over the limit makes the attempt an error."""
        if reply.kind != "ops":
            return reply
        if len(reply.body) > self._limits.steps:
            raise function_overflowed(self._limits)
        for op in reply.body:
            if stored_bytes(_stored(op)) > self._limits.step_output_bytes:
                return Reply("error", step_output_error(str(op.get("id"))), reply.no_retry)
        return reply

    def _memoize(self, run: Run, op: JSONDict, attempt: int) -> None:
        kind, name = op.get("op"), str(op.get("displayName") or op.get("id"))
        if kind not in ("StepRun", "StepError", "StepFailed"):
            raise AbortRunError(
                f"step {name!r} uses opcode {kind!r}, which LocalInngest does not run"
            )
        stored = _stored(op)
        self._store(run, str(op["id"]), name, stored)
        run.ops.append((name, str(kind)))
        run.attempts[name] = attempt + 1

    def _store(self, run: Run, step_id: str, name: str, value: object, check: bool = True) -> None:
        """Keep a step's output in the run's state, unless it would take the state past the
        limit (checked for outputs the SDK returned, as Inngest does)."""
        size = stored_bytes(value)
        # An output stored again replaces the first.
        replaced = stored_bytes(run.steps[step_id]) if step_id in run.steps else 0
        state = run.state_bytes - replaced + size
        if check and state > self._limits.state_bytes:
            raise state_overflowed(self._limits)
        run.steps[step_id] = value
        run.state_bytes = state
        run.step_bytes[name] = size

    def _finish(self, run: Run, reply: Reply, attempt: int) -> None:
        run.attempts[FUNCTION_ATTEMPT_KEY] = attempt + 1
        if reply.kind == "done":
            run.status, run.output = "completed", reply.body
            return
        self._failed(run, reply.body if reply.kind == "transport" else error_from(reply.body))

    def _failed(self, run: Run, err: JSONDict) -> None:
        """The run failed as a function fails: ``inngest/function.failed`` reaches on_failure."""
        run.status, run.error = "failed", err
        if not run.target.is_failure_handler:
            data = {
                "function_id": run.target.fn_id,
                "run_id": run.run_id,
                "error": run.error,
                "event": run.event,
            }
            self._emit(FUNCTION_FAILED_EVENT, data)

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
            # Cancelled while queued for a slot: the request must not go out.
            self._check_live(run)
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


def _stored(op: JSONDict) -> object:
    """What Inngest stores for a step op: its data, or its error, wrapped."""
    if op.get("op") in ("StepError", "StepFailed"):
        return {"error": error_from(op.get("error"))}
    return {"data": op.get("data")}
