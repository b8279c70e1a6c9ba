"""A new message's first round trip: the chat's route read, and the turn of the assistant most
likely to answer started with the head its history continues, in one statement
(`handoff.open_turn`, infra/store/admission.py).

Who most likely answers is known from the request alone (turns/routing.py, `expected`): the
one assistant it names or @-mentions, or the deployment's default when it names none. The chat
confirms it or not; when not (the chat's own default differs, the chat is shared, the named one
is not in it), nothing is started and respond routes as the chat says, then starts the turn of
whoever answers as before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import Span

from infra import telemetry
from infra.store import admission
from infra.store.assistants import ChatRoute
from infra.store.limits import TurnLimits
from turns.ahead import Ahead, run_ahead
from turns.begun import Begun, begin, drop_task, trace_turn
from turns.engine import Run
from turns.routing import names_of
from turns.start import Strategy, admission_of
from turns.streaming import TurnHost
from turns.turn import Turn


@dataclass(frozen=True)
class Opened:
    """What the first round trip found: the chat's `route` (None: not the sender's chat, and
    a start refuses it) and the `begun` turn, when the chat confirmed it: `started` (its message
    and reply stored, its slot taken, its head read), or with its slot found taken and nothing
    stored. `span`: the trace begun for it, which goes on with whoever answers."""

    route: ChatRoute | None
    span: Span
    begun: Begun | None = None
    started: bool = False
    ahead: Ahead | None = None  # the run begun ahead, when it goes on

    def begun_for(self, host: TurnHost, turn: Turn) -> Begun:
        """The turn begun for `turn`: the likeliest's, followed to `turn` (`Begun.retarget`),
        else `turn`'s history loaded under the same trace."""
        if self.begun is not None:
            return self.begun.retarget(host, turn)
        return begin(host, turn, span=self.span)

    def drop(self) -> None:
        """Nothing comes of it: the request failed before the turn started."""
        _dropped(self.ahead)
        if self.begun is not None:
            self.begun.drop()
        else:
            self.span.end()


async def open_likeliest(
    host: TurnHost,
    turn: Turn,
    *,
    expect: admission.Expect,
    strategy: Strategy,
    limits: TurnLimits,
) -> Opened:
    """Read the chat's route and start `turn` if the chat confirms that its assistant answers
    as `expect` says, its run begun ahead meanwhile (turns/ahead.py). Refusals raise as a
    start's (turns/start.py), nothing stored."""
    span = trace_turn(turn)
    ahead = None
    with trace.use_span(span):
        started = asyncio.create_task(_open(host, turn, expect, strategy, limits))
        try:
            await asyncio.sleep(0)  # the statement goes out before the run ahead takes the loop
            ahead = await run_ahead(host, turn)
            opened = await started
        except BaseException:
            drop_task(started)
            _dropped(ahead)
            span.end()
            raise
    if not (opened.started or opened.slot_taken):
        _dropped(ahead)
        return Opened(opened.route, span)
    # A turn that hears the chat's other voices opens with what they said: not run ahead.
    hears = names_of(host.assistants, opened.route)
    if ahead is not None and opened.started and ahead.confirmed_by(opened.head) and not hears:
        run = ahead.go()
        return Opened(opened.route, span, Begun(turn, span, _ready(run)), True, ahead)
    _dropped(ahead)
    begun = begin(host, turn, span=span, read=opened.head)
    return Opened(opened.route, span, begun, opened.started)


async def _open(
    host: TurnHost, turn: Turn, expect: admission.Expect, strategy: Strategy, limits: TurnLimits
) -> admission.Opened:
    with telemetry.tracer.start_as_current_span(
        "store message", attributes={"handoff.strategy": strategy}
    ):
        async with (await host.services.pool()).connection() as conn:
            return await admission.open_turn(
                conn,
                admission_of(turn, strategy, limits, ()),
                expect=expect,
                fallback=host.assistants.default.id,
                thread_id=turn.thread_id,
            )


def _dropped(ahead: Ahead | None) -> None:
    if ahead is not None:
        ahead.drop()


def _ready(run: Run) -> asyncio.Task[Run]:
    async def ready() -> Run:
        return run

    return asyncio.create_task(ready())
