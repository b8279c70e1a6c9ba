"""The run driver: discovery requests, planned steps, retries, waits and their memos."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence

from devkit.local_inngest.expressions import lookup
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
# Guards against an SDK/executor disagreement looping forever.
_MAX_DISCOVERIES = 1000


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
    ) -> None:
        if not backoff:
            raise ValueError("retry_backoff needs at least one delay")
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
                    run.steps[str(op["id"])] = future.result()
                    run.attempts[str(op.get("displayName") or op.get("id"))] = attempt + 1
        raise AbortRunError(f"no completion after {_MAX_DISCOVERIES} discovery requests")

    async def _job(
        self, run: Run, step_id: str | None, disable_immediate: bool
    ) -> tuple[Reply, int]:
        attempt = 0
        while True:
            self._check_live(run)
            reply = await self._endpoint.call(
                run, step_id, attempt, disable_immediate, self._concurrency(run)
            )
            self._check_live(run)
            if self._drop_output(reply):
                reply = transport_error("output dropped")
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
