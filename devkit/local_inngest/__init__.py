"""Development/test-only stand-in for the Inngest server.

No Inngest dev-server binary exists on this machine, so ``LocalInngest`` plays both
server roles against the app's real serve endpoint, over real HTTP:

* **Event API** (``intake``): ``POST /e/{event_key}`` exactly as ``Inngest.send`` posts
  it; answers ``{"ids": [...], "status": 200}``; 401 on a wrong event key. Event ids
  are deduplicated (24h, in memory): a repeated id is accepted but starts no run.
  ``send()`` accepts an event in-process the same way. ``replay()`` starts a fresh run
  for a stored event, like the dashboard's replay.
* **Executor**: ``POST {serve_url}?fnId=<id>&stepId=<step>`` with the request body the
  SDK parses and an ``X-Inngest-Signature`` it verifies (and the SDK's response
  signature is checked in turn). Step results are memoized as parsed JSON; step and
  function errors retry with a configurable backoff, counting attempts per step the way
  Inngest does (the counter resets once a step completes); parallel steps are planned,
  run one targeted request each, then discovery continues with
  ``disable_immediate_execution``; a finally failed run emits
  ``inngest/function.failed``, which reaches ``on_failure`` handlers; keyed
  ``concurrency`` limits how many SDK requests are in flight per key value.
* ``step.wait_for_event``: the run parks from the moment the executor reads the
  ``WaitForEvent`` op; the first later event of that name whose ``if`` matches becomes
  the step's output (the event object), or None once the timeout passes. An event
  accepted before that matches nothing, however shortly before: events are not kept for
  waits to come, as on Inngest (inngest/inngest#1433), so a run that commits state in one
  step and waits in the next has a window (one round trip to the app) in which a
  wake-up is lost. One event resolves every wait it matches, across runs.
  ``waiting()`` lists pending waits; ``expire_waits()`` times them out at once.
* Latency: ``call_delay_s`` (constructor argument, or set on a running executor) is slept
  before every call to the serve endpoint, inside the call's concurrency slot, as the time
  Inngest Cloud takes to reach a Lambda; it widens the window above as it does in
  production. A run cancelled during the delay is not called.
* Function ``cancel``: an event accepted after a run started that matches one of its
  function's cancel clauses (within the clause's ``timeout``, if any) cancels the run,
  as does ``cancel(run_id)``. No further request is made for it (one in flight finishes,
  its answer is ignored), its waits are dropped, its status is ``cancelled``, and
  ``inngest/function.cancelled`` is emitted with ``function_id``, ``run_id``, ``error``
  and the original ``event``.
* Expressions (triggers, waits, cancels): ``==`` between ``event.<path>``,
  ``async.<path>`` (waits and cancels) and quoted strings, joined by ``&&``; anything
  else raises ``UnsupportedExpression``: at construction for triggers and cancel clauses,
  as a failed run (``LocalInngestUnsupported``) for a wait.
* Cron schedules fire at the top of each UTC minute that matches (see its ``cron`` module for
  the syntax), while ``schedules=True``; ``fire()`` runs a cron function at once.
* Limits (``limits``; Inngest's own unless ``LocalInngest(limits=...)`` sets smaller ones): a
  step output over 4 MiB makes its attempt an error (``error validating generator opcode
  <id>: step output size is greater than the limit``), retried like any other, then the run
  fails; an output that would take the run's state (its event and every stored output) past
  32 MiB fails the run at once (``InngestErrStateOverflowed``); a run that has stored 1,000
  steps, or a response that plans more than 1,000, fails at once
  (``InngestErrFunctionOverflowed``). Each failure emits ``inngest/function.failed``.
  ``RunRecord.state_bytes`` and ``step_bytes`` say how much state a run holds, counted as
  Inngest counts it.
* Faults, for reliability tests: ``drop_step_output()`` discards the SDK's answer for a
  named step once it has run (a crash before the result was memoized), and
  ``refuse_events()`` makes the intake answer 503 (an Inngest outage).

* Recordings, for checking a new build against runs in flight: ``RunRecord.ops`` lists each
  stored step's display name and opcode in order, ``RunRecord.memo`` is the memo the SDK
  receives, and ``resume_recorded()`` starts a run of a recorded event with that memo, as a
  run in flight meets a new deploy (Inngest has no such call: there the run simply goes on).

``wait_idle()`` returns once every run has ended or is parked in a wait, so a test
starts a run, ``wait_idle()``, sends the awaited event, then ``wait_idle()`` again;
``wait_run()`` waits for one run to end (a timeout included) and ``wait_for()`` for any
condition on executor state.

NOT simulated (do not infer production behaviour from these):

* ``step.sleep``/``sleep_until``, ``step.invoke``, ``step.ai.*``: the run fails with
  error name ``LocalInngestUnsupported``.
* Event-name wildcards other than a trailing ``*`` in triggers (waits and cancels match
  names exactly); the ``match`` field of older SDKs; CEL beyond the subset above.
* Batching, debounce, rate limits, throttle, priority, singleton, function ``timeouts``,
  the function-level ``idempotency`` option.
* Latency as it is: one fixed delay before each request (no jitter, no cold starts, none on
  the way back, none between Inngest's own parts, such as an event reaching a wait).
* ``RetryAfterError``'s ``retry-after`` time (the configured backoff is used), backoff
  jitter, ``use_api`` payload offloading, streaming responses, Connect.
* Other limits: the event size (256 KiB on the free plan), step inputs, the 8 MiB response
  body (``output_too_large``; an output that large fails here as over 4 MiB), the function's
  return value counting towards the state, the 2-hour step timeout.
* Concurrency keys other than ``event.<path>`` (checked at construction); ``account``
  and ``env`` scopes share slots only among functions of this instance.
* Multiple apps, app sync/registration, the REST API, durable queues and persistence:
  everything lives in memory and ``stop()`` abandons in-flight runs and their waits.
* The ids answered by the intake are the events' own ids (generated when missing);
  real Inngest answers internal ULIDs.

The app's client must use ``is_production=True`` and the same signing key: a dev-mode
SDK neither verifies nor signs, and its runs are aborted. Everything runs on the event
loop that called ``start()``; serve the intake on that loop (``serve_intake``).

Modules: ``executor`` (``LocalInngest``: events in, cancellation, the handles tests
hold), ``driver`` (one run's requests, retries and memos), ``limits``, ``waits``,
``expressions`` (and durations), ``targets`` (function configs), ``transport`` (one signed
call to the serve endpoint), ``intake`` (the Event API, dedup), ``runs`` (run state,
``RunRecord``), ``signing``, ``server`` (``serve_asgi``, ``serve_asgi_together``, loopback
sockets).
"""

from devkit.local_inngest.driver import FUNCTION_FAILED_EVENT
from devkit.local_inngest.executor import (
    FUNCTION_CANCELLED_EVENT,
    SCHEDULED_EVENT,
    LocalInngest,
)
from devkit.local_inngest.expressions import UnsupportedExpression
from devkit.local_inngest.limits import Limits
from devkit.local_inngest.runs import FUNCTION_ATTEMPT_KEY, RunRecord, RunStatus
from devkit.local_inngest.server import (
    loopback_socket,
    serve_asgi,
    serve_asgi_together,
    socket_origin,
)
from devkit.local_inngest.signing import sign_body
from devkit.local_inngest.targets import DEFAULT_RETRIES
from devkit.local_inngest.waits import WaitRecord

__all__ = [
    "DEFAULT_RETRIES",
    "FUNCTION_ATTEMPT_KEY",
    "FUNCTION_CANCELLED_EVENT",
    "FUNCTION_FAILED_EVENT",
    "SCHEDULED_EVENT",
    "Limits",
    "LocalInngest",
    "RunRecord",
    "RunStatus",
    "UnsupportedExpression",
    "WaitRecord",
    "loopback_socket",
    "serve_asgi",
    "serve_asgi_together",
    "sign_body",
    "socket_origin",
]
