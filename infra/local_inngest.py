"""Development/test-only stand-in for the Inngest server.

No Inngest dev-server binary exists on this machine, so ``LocalInngest`` plays both
server roles against the app's real serve endpoint, over real HTTP:

* **Event API** (``intake``): ``POST /e/{event_key}`` exactly as ``Inngest.send`` posts
  it; answers ``{"ids": [...], "status": 200}``; 401 on a wrong event key. Event ids
  are deduplicated (24h, in memory): a repeated id is accepted but starts no run.
  ``replay()`` starts a fresh run for a stored event, like the dashboard's replay.
* **Executor**: ``POST {serve_url}?fnId=<id>&stepId=<step>`` with the request body the
  SDK parses and an ``X-Inngest-Signature`` it verifies (and the SDK's response
  signature is checked in turn). Step results are memoized as parsed JSON; step and
  function errors retry with a configurable backoff, counting attempts per step the way
  Inngest does (the counter resets once a step completes); parallel steps are planned,
  run one targeted request each, then discovery continues with
  ``disable_immediate_execution``; a finally failed run emits
  ``inngest/function.failed``, which reaches ``on_failure`` handlers; keyed
  ``concurrency`` limits how many SDK requests are in flight per key value.
* Cron schedules fire at the top of each UTC minute that matches (see ``infra.cron`` for
  the syntax), while ``schedules=True``; ``fire()`` runs a cron function at once.
* Faults, for reliability tests: ``drop_step_output()`` discards the SDK's answer for a
  named step once it has run (a crash before the result was memoized), and
  ``refuse_events()`` makes the intake answer 503 (an Inngest outage).

NOT simulated (do not infer production behaviour from these):

* ``step.sleep``/``sleep_until``, ``step.wait_for_event``, ``step.invoke``,
  ``step.ai.*``: the run fails with error name ``LocalInngestUnsupported``.
* Trigger ``expression`` filters other than
  ``event.<path> == '<string>'`` are rejected at construction; event-name wildcards
  only as a trailing ``*``.
* Batching, debounce, rate limits, throttle, priority, singleton, cancellation
  (``cancel``), timeouts, the function-level ``idempotency`` option.
* ``RetryAfterError``'s ``retry-after`` time (the configured backoff is used), backoff
  jitter, ``use_api`` payload offloading, streaming responses, Connect.
* Concurrency keys other than ``event.<path>`` (checked at construction); ``account``
  and ``env`` scopes share slots only among functions of this instance.
* Multiple apps, app sync/registration, the REST API, durable queues and persistence:
  everything lives in memory and ``stop()`` abandons in-flight runs.
* The ids answered by the intake are the events' own ids (generated when missing);
  real Inngest answers internal ULIDs.

The app's client must use ``is_production=True`` and the same signing key: a dev-mode
SDK neither verifies nor signs, and its runs are aborted. Everything runs on the event
loop that called ``start()``; serve the intake on that loop (``serve_intake``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import json
import logging
import re
import socket
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
import inngest
import jcs  # type: ignore[import-untyped]
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from infra.cron import Cron

_log = logging.getLogger(__name__)

RunStatus = Literal["running", "completed", "failed"]
JSONDict = dict[str, Any]

FUNCTION_FAILED_EVENT = "inngest/function.failed"
SCHEDULED_EVENT = "inngest/scheduled.timer"
# Inngest's documented default when a function sets no `retries`.
DEFAULT_RETRIES = 4
# RunRecord.attempts key for requests that ended the run (200/500) rather than a step.
FUNCTION_ATTEMPT_KEY = "$function"
# The SDK registers every function's entry point under this step id.
_ROOT_STEP = "step"
_DEDUP_WINDOW_S = 24 * 3600.0
# Guards against an SDK/executor disagreement looping forever.
_MAX_DISCOVERIES = 1000
_PATH_EXPR = re.compile(r"^event(\.[A-Za-z_]\w*)+$")
_EQ_EXPR = re.compile(r"""^\s*(event(?:\.[A-Za-z_]\w*)+)\s*==\s*(?:'([^']*)'|"([^"]*)")\s*$""")


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


def sign_body(body: bytes, signing_key: str, unix_s: int | None = None) -> str:
    """``X-Inngest-Signature`` for a JCS-canonical body, as the SDK recomputes it."""
    ts = int(time.time()) if unix_s is None else unix_s
    mac = hmac.new(_secret(signing_key), body + str(ts).encode(), hashlib.sha256)
    return f"t={ts}&s={mac.hexdigest()}"


def _secret(signing_key: str) -> bytes:
    # Mirrors the SDK: the `signkey-<env>-` prefix is dropped and the rest is used as
    # UTF-8 text (not hex-decoded).
    return re.sub(r"^signkey-\w+-", "", signing_key, count=1).encode()


def _canonical_json(value: object) -> bytes:
    # The SDK verifies the HMAC over the JCS form of whatever body it receives, so
    # sending the canonical bytes themselves makes "signed" and "sent" identical.
    out = jcs.canonicalize(value)
    if not isinstance(out, bytes):
        raise TypeError("jcs.canonicalize did not return bytes")
    return out


def _lookup(event: Mapping[str, Any], path: str) -> Any:
    node: Any = {"event": event}
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _error(name: str, message: str, stack: str | None = None) -> JSONDict:
    return {"name": name, "message": message, "stack": stack}


def _error_from(raw: object) -> JSONDict:
    src = raw if isinstance(raw, dict) else {}
    return _error(str(src.get("name", "Error")), str(src.get("message", raw)), src.get("stack"))


class _AbortRunError(Exception):
    """The executor cannot continue this run faithfully; fails it without on_failure."""


@dataclasses.dataclass(frozen=True)
class _Target:
    fn_id: str
    triggers: tuple[tuple[str, Callable[[Mapping[str, Any]], bool] | None], ...]
    crons: tuple[tuple[str, Cron], ...]
    max_attempts: int
    concurrency: tuple[inngest.Concurrency, ...]
    is_failure_handler: bool

    def matches(self, event: Mapping[str, Any]) -> bool:
        name = str(event["name"])
        for pattern, predicate in self.triggers:
            named = pattern == name or (pattern.endswith("*") and name.startswith(pattern[:-1]))
            if named and (predicate is None or predicate(event)):
                return True
        return False


def _compile_filter(expr: str | None) -> Callable[[Mapping[str, Any]], bool] | None:
    if expr is None:
        return None
    m = _EQ_EXPR.match(expr)
    if m is None:
        raise ValueError(f"LocalInngest only supports `event.<path> == '<str>'`, got {expr!r}")
    path, literal = m.group(1), m.group(2) if m.group(2) is not None else m.group(3)
    return lambda event: _lookup(event, path) == literal


def _targets(functions: Sequence[inngest.Function[Any]], serve_url: str) -> list[_Target]:
    out: list[_Target] = []
    for fn in functions:
        config = fn.get_config(serve_url)
        for fc in (config.main, config.on_failure):
            if fc is None:
                continue
            for c in fc.concurrency or []:
                if c.key is not None and not _PATH_EXPR.match(c.key):
                    raise ValueError(f"{fc.id}: unsupported concurrency key {c.key!r}")
            retries = fc.steps[_ROOT_STEP].retries
            triggers = tuple(
                (t.event, _compile_filter(t.expression))
                for t in fc.triggers
                if isinstance(t, inngest.TriggerEvent)
            )
            crons = tuple(
                (t.cron, Cron.parse(t.cron))
                for t in fc.triggers
                if isinstance(t, inngest.TriggerCron)
            )
            out.append(
                _Target(
                    fn_id=fc.id,
                    triggers=triggers,
                    crons=crons,
                    max_attempts=(DEFAULT_RETRIES if retries is None else retries.attempts) + 1,
                    concurrency=tuple(fc.concurrency or ()),
                    is_failure_handler=fc is config.on_failure,
                )
            )
    return out


@dataclasses.dataclass
class _Run:
    run_id: str
    event: JSONDict
    target: _Target
    status: RunStatus = "running"
    output: Any = None
    error: JSONDict | None = None
    attempts: dict[str, int] = dataclasses.field(default_factory=dict)
    # Insertion order doubles as the memo stack the SDK receives.
    steps: JSONDict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class _Reply:
    kind: Literal["ops", "done", "error", "transport"]
    body: Any = None
    no_retry: bool = False

    @property
    def retriable(self) -> bool:
        if self.kind == "transport":
            return True
        if self.no_retry or self.kind == "done":
            return False
        return self.kind == "error" or any(op.get("op") == "StepError" for op in self.body)


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
        self._serve_url = serve_url
        self._signing_key = signing_key
        self._event_key = event_key
        self._backoff = tuple(retry_backoff)
        self._timeout = request_timeout
        self._targets = _targets(functions, serve_url)
        # fnId is `<app_id>-<fn_id>`; a mismatch means the functions came from another client.
        strays = [t.fn_id for t in self._targets if not t.fn_id.startswith(f"{app_id}-")]
        if strays:
            raise ValueError(f"functions {strays} do not belong to app {app_id!r}")
        self._events: dict[str, tuple[float, JSONDict]] = {}
        self._runs: list[_Run] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._http: httpx.AsyncClient | None = None
        self._schedules = schedules
        self._scheduler: asyncio.Task[None] | None = None
        self._dropped_outputs: dict[str, int] = {}
        self._refused_events = 0
        self.intake: ASGIApp = Starlette(
            routes=[Route("/e/{event_key}", self._intake_post, methods=["POST"])]
        )

    async def start(self) -> None:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self._timeout)
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
        if self._http is not None:
            await self._http.aclose()
            self._http = None

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
        return [
            RunRecord(
                run_id=r.run_id,
                event_id=str(r.event["id"]),
                function_id=r.target.fn_id,
                status=r.status,
                output=r.output,
                error=dict(r.error) if r.error is not None else None,
                attempts=dict(r.attempts),
            )
            for r in self._runs
        ]

    async def replay(self, event_id: str, function_id: str | None = None) -> str:
        """Start a new run for a stored event, bypassing dedup; returns its run id."""
        if event_id not in self._events:
            raise KeyError(f"unknown event id {event_id!r}")
        event = self._events[event_id][1]
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
        self._refused_events += count

    async def _run_schedules(self) -> None:
        while True:
            await asyncio.sleep(60 - time.time() % 60 + 0.001)
            for function_id in self.due(datetime.now(UTC)):
                self.fire(function_id)

    @staticmethod
    def _scheduled_event(expression: str) -> JSONDict:
        return _normalize_event({"name": SCHEDULED_EVENT, "data": {"cron": expression}})

    async def _intake_post(self, request: Request) -> JSONResponse:
        given = str(request.path_params["event_key"]).encode()
        if not hmac.compare_digest(given, self._event_key.encode()):
            return JSONResponse({"error": "event key not found", "status": 401}, 401)
        if self._refused_events > 0:
            self._refused_events -= 1
            return JSONResponse({"error": "unavailable (refuse_events)", "status": 503}, 503)
        if self._http is None:
            return JSONResponse({"error": "LocalInngest not started", "status": 503}, 503)
        try:
            raw = json.loads(await request.body())
            events = [_normalize_event(item) for item in (raw if isinstance(raw, list) else [raw])]
        except ValueError as err:
            return JSONResponse({"error": str(err), "status": 400}, 400)
        for event in events:
            self._accept(event)
        return JSONResponse({"ids": [e["id"] for e in events], "status": 200})

    def _accept(self, event: JSONDict) -> None:
        now = time.monotonic()
        seen = self._events.get(event["id"])
        if seen is not None and now - seen[0] < _DEDUP_WINDOW_S:
            return
        self._events[event["id"]] = (now, event)
        for target in self._targets:
            if target.matches(event):
                self._start_run(target, event)

    def _start_run(self, target: _Target, event: JSONDict) -> str:
        if self._http is None:
            raise RuntimeError("LocalInngest.start() has not been awaited")
        run = _Run(run_id=str(uuid.uuid4()), event=event, target=target)
        self._runs.append(run)
        task = asyncio.get_running_loop().create_task(self._guarded(run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run.run_id

    async def _guarded(self, run: _Run) -> None:
        try:
            await self._drive(run)
        except _AbortRunError as err:
            _log.error("run %s (%s) aborted: %s", run.run_id, run.target.fn_id, err)
            run.status, run.error = "failed", _error("LocalInngestUnsupported", str(err))
        except Exception as err:
            # A crashed driver must still end the run, or wait_idle() would hang.
            _log.exception("run %s (%s) crashed", run.run_id, run.target.fn_id)
            run.status, run.error = "failed", _error("LocalInngestInternalError", repr(err))

    async def _drive(self, run: _Run) -> None:
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
        raise _AbortRunError(f"no completion after {_MAX_DISCOVERIES} discovery requests")

    async def _job(
        self, run: _Run, step_id: str | None, disable_immediate: bool
    ) -> tuple[_Reply, int]:
        attempt = 0
        while True:
            reply = await self._call(run, step_id, attempt, disable_immediate)
            if not reply.retriable or attempt + 1 >= run.target.max_attempts:
                return reply, attempt
            if reply.kind == "transport":
                _log.warning("run %s attempt %d: %s", run.run_id, attempt, reply.body["message"])
            await asyncio.sleep(self._backoff[min(attempt, len(self._backoff) - 1)])
            attempt += 1

    def _memoize(self, run: _Run, op: JSONDict, attempt: int) -> None:
        kind, name = op.get("op"), str(op.get("displayName") or op.get("id"))
        if kind == "StepRun":
            run.steps[str(op["id"])] = {"data": op.get("data")}
        elif kind in ("StepError", "StepFailed"):
            run.steps[str(op["id"])] = {"error": _error_from(op.get("error"))}
        else:
            raise _AbortRunError(
                f"step {name!r} uses opcode {kind!r}, which LocalInngest does not run"
            )
        run.attempts[name] = attempt + 1

    def _finish(self, run: _Run, reply: _Reply, attempt: int) -> None:
        run.attempts[FUNCTION_ATTEMPT_KEY] = attempt + 1
        if reply.kind == "done":
            run.status, run.output = "completed", reply.body
            return
        run.status = "failed"
        run.error = reply.body if reply.kind == "transport" else _error_from(reply.body)
        if not run.target.is_failure_handler:
            data = {
                "function_id": run.target.fn_id,
                "run_id": run.run_id,
                "error": run.error,
                "event": run.event,
            }
            self._accept(_normalize_event({"name": FUNCTION_FAILED_EVENT, "data": data}))

    @contextlib.asynccontextmanager
    async def _concurrency(self, run: _Run) -> AsyncIterator[None]:
        keys = []
        for c in run.target.concurrency:
            scope = run.target.fn_id if c.scope in (None, "fn") else c.scope
            value = _lookup(run.event, c.key) if c.key else None
            key = json.dumps([scope, c.key, c.limit, value], sort_keys=True, default=str)
            self._slots.setdefault(key, asyncio.Semaphore(c.limit))
            keys.append(key)
        async with contextlib.AsyncExitStack() as stack:
            # A global acquisition order keeps overlapping key sets deadlock-free.
            for key in sorted(keys):
                await stack.enter_async_context(self._slots[key])
            yield

    async def _call(
        self, run: _Run, step_id: str | None, attempt: int, disable_immediate: bool
    ) -> _Reply:
        assert self._http is not None
        body = _canonical_json(
            {
                "ctx": {
                    "run_id": run.run_id,
                    "attempt": attempt,
                    "max_attempts": run.target.max_attempts,
                    "disable_immediate_execution": disable_immediate,
                    "use_api": False,
                    "stack": {"stack": list(run.steps)},
                },
                "event": run.event,
                "events": [run.event],
                "steps": run.steps,
                "use_api": False,
                "version": 1,
            }
        )
        headers = {
            "content-type": "application/json",
            "x-inngest-signature": sign_body(body, self._signing_key),
            "x-inngest-server-kind": "cloud",
        }
        params = {"fnId": run.target.fn_id, "stepId": step_id or _ROOT_STEP}
        try:
            async with self._concurrency(run):
                res = await self._http.post(
                    self._serve_url, params=params, content=body, headers=headers
                )
            parsed = res.json() if res.content else None
        except (httpx.HTTPError, ValueError) as err:
            return _Reply("transport", _error("LocalInngestTransportError", repr(err)))
        if res.headers.get("x-inngest-expected-server-kind") == "dev":
            raise _AbortRunError("serve endpoint's client has is_production=False: it cannot sign")
        # Anything the SDK did not sign (a proxy's 502, a crashed worker, a 401 from a
        # rejected signature) is a transport failure of this attempt, hence retriable.
        if res.status_code not in (200, 206, 500) or not self._signed_by_sdk(res):
            msg = f"HTTP {res.status_code} without a valid SDK signature: {res.text[:300]}"
            return _Reply("transport", _error("LocalInngestTransportError", msg))
        no_retry = res.headers.get("x-inngest-no-retry") == "true"
        if self._drop_output(res.status_code, parsed):
            return _Reply("transport", _error("LocalInngestTransportError", "output dropped"))
        if res.status_code == 206 and isinstance(parsed, list):
            return _Reply("ops", [op for op in parsed if isinstance(op, dict)], no_retry)
        if res.status_code == 200:
            return _Reply("done", parsed)
        return _Reply("error", parsed, no_retry)

    def _drop_output(self, status: int, parsed: Any) -> bool:
        if status == 206 and isinstance(parsed, list):
            names = [
                str(op.get("displayName") or op.get("id"))
                for op in parsed
                if isinstance(op, dict) and op.get("op") == "StepRun"
            ]
        else:
            names = [FUNCTION_ATTEMPT_KEY] if status == 200 else []
        for name in names:
            if self._dropped_outputs.get(name, 0) > 0:
                self._dropped_outputs[name] -= 1
                _log.warning("dropping the output of step %r (fault injection)", name)
                return True
        return False

    def _signed_by_sdk(self, res: httpx.Response) -> bool:
        parsed = urllib.parse.parse_qs(res.headers.get("x-inngest-signature", ""))
        ts, sig = parsed.get("t", [""])[0], parsed.get("s", [""])[0]
        mac = hmac.new(_secret(self._signing_key), res.content + ts.encode(), hashlib.sha256)
        return bool(sig) and hmac.compare_digest(sig.encode(), mac.hexdigest().encode())


def _normalize_event(item: object) -> JSONDict:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise ValueError("each event must be an object with a non-empty string name")
    data = item.get("data") or {}
    event_id = item.get("id") or str(uuid.uuid4())
    ts = item.get("ts") or int(time.time() * 1000)
    if not isinstance(data, dict) or not isinstance(event_id, str) or not isinstance(ts, int):
        raise ValueError("event data must be an object, id a string and ts an integer")
    return {"name": item["name"], "data": data, "id": event_id, "ts": ts}


def loopback_socket(host: str = "127.0.0.1") -> socket.socket:
    """A bound socket on a free port: reserve origins before building clients/apps."""
    # proto=IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on connections whose
    # socket says TCP. Without it, Nagle holds each small SSE write until the client's delayed
    # ACK (~40 ms on Linux) releases it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def socket_origin(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}"


class _EmbeddedServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # An embedded server must not take over the host process's SIGINT/SIGTERM;
        # nested servers would also restore each other's handlers in the wrong order.
        yield


@contextlib.asynccontextmanager
async def serve_asgi(
    app: ASGIApp, sock: socket.socket | None = None, startup_timeout: float = 10.0
) -> AsyncIterator[str]:
    """Run ``app`` with uvicorn on the current loop; yields its ``http://host:port``."""
    sock = sock or loopback_socket()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if task.done() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            await asyncio.sleep(0.01)
        yield socket_origin(sock)
    finally:
        server.should_exit = True
        await task
        sock.close()
