"""A turn begun: its trace opened and its history loading (or loaded, or run ahead), for the
assistant most likely to answer when respond starts it with the route's read (turns/opened.py),
else for the one that answers."""

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
    """A turn's trace and its history load, begun: by `stream_turn`, or with the start of the
    turn most likely to answer (`retarget` follows the route)."""

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


def begin(
    host: TurnHost, turn: Turn, *, span: Span | None = None, read: dict[str, Any] | None = None
) -> Begun:
    """Begin `turn`'s trace (it goes with the turn, into the background too; `span`: begun
    already) and load its history, which stands between the request and its first token
    (`read`: its head as its start read it)."""
    span = span or trace_turn(turn)
    with trace.use_span(span):
        return Begun(turn, span, asyncio.create_task(_load(host, turn, read)))


def trace_turn(turn: Turn) -> Span:
    """The span of `turn`'s whole trace."""
    return telemetry.tracer.start_span(
        "invoke_agent handoff",
        attributes={"gen_ai.operation.name": "invoke_agent", **turn.attributes},
    )


async def _load(host: TurnHost, turn: Turn, read: dict[str, Any] | None = None) -> Run:
    pool = await host.services.pool()
    assistant = host.assistants.pick(turn.assistant_id)
    return await load_run(pool, turn, assistant, host.services.settings, read=read)


def drop_task(task: asyncio.Task[Any]) -> None:
    """Cancel a task whose outcome nobody needs any more."""
    task.cancel()
    task.add_done_callback(_discard)


def _discard(task: asyncio.Task[Any]) -> None:
    """Retrieve a dropped task's outcome, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
