"""A turn begun before its route is known: its trace opened and its history loading, for the
assistant most likely to answer, while respond reads who does (turns/routing.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span

from infra import telemetry
from turns.engine import Run, hear, load_run
from turns.turn import Turn

if TYPE_CHECKING:
    from turns.streaming import TurnHost


@dataclass(frozen=True)
class Begun:
    """A turn's trace and its history load, begun: by `stream_turn`, or before the route is
    known for the turn most likely to answer (`retarget` follows the route)."""

    turn: Turn
    span: Span
    run: asyncio.Task[Run]

    def retarget(self, host: TurnHost, turn: Turn) -> Begun:
        """The same trace for `turn`: its history as loaded when `turn` is the begun one's,
        then given what the chat's other voices said (turns/context.py) if it hears them;
        else loaded anew."""
        if turn.reply_id != self.turn.reply_id:
            drop_task(self.run)
            with trace.use_span(self.span):
                return Begun(turn, self.span, asyncio.create_task(_load(host, turn)))
        if not turn.assistant_names:
            return self

        async def hears() -> Run:
            return await hear(await host.services.pool(), turn, await self.run)

        with trace.use_span(self.span):
            return Begun(turn, self.span, asyncio.create_task(hears()))

    def drop(self) -> None:
        """Nothing comes of it: the request failed before the turn started."""
        drop_task(self.run)
        self.span.end()


def begin(host: TurnHost, turn: Turn) -> Begun:
    """Begin `turn`'s trace (it goes with the turn, into the background too) and load its
    history, which stands between the request and its first token."""
    span = telemetry.tracer.start_span(
        "invoke_agent handoff",
        attributes={"gen_ai.operation.name": "invoke_agent", **turn.attributes},
    )
    with trace.use_span(span):
        return Begun(turn, span, asyncio.create_task(_load(host, turn)))


async def _load(host: TurnHost, turn: Turn) -> Run:
    pool = await host.services.pool()
    assistant = host.assistants.pick(turn.assistant_id)
    return await load_run(pool, turn, assistant, host.services.settings)


def drop_task(task: asyncio.Task[Any]) -> None:
    """Cancel a task whose outcome nobody needs any more."""
    task.cancel()
    task.add_done_callback(_discard)


def _discard(task: asyncio.Task[Any]) -> None:
    """Retrieve a dropped task's outcome, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
