"""A turn from its request to its stream: the Turn a new message (or a message answered again)
makes, its start, and the events its response relays.

Respond and regenerate differ only in how they find the message to answer; from the Turn on,
both go through `stream_turn`. The events come out as (name, data) pairs for the shell to frame.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from agent.assistants import Assistant, Assistants
from agent.threads import thread_key
from infra import telemetry
from infra.db import Pool
from infra.events import EventSender, send_cancel
from infra.runtime import Services
from infra.settings import Settings
from infra.store.access import Claims
from infra.store.forks import Edit
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.jobs import CanceledJob
from infra.store.limits import TurnLimits
from infra.store.steers import SteeredJob
from turns.assistants import turn_model_spec
from turns.begun import Begun, begin, drop_task
from turns.endings import Next, send_next
from turns.engine import Run
from turns.quick import Emit, run_turn
from turns.start import Slot, Strategy, start_turn
from turns.turn import Turn

# A stream event: its name, and its data, a JSON object (docs/api.md lists each).
Event = tuple[str, Mapping[str, object]]
# The turns running detached from their responses.
TurnTasks = set[asyncio.Task[Any]]


@dataclass(frozen=True)
class TurnStream:
    """What a turn's response relays: its events, in batches of those emitted together, and,
    while it runs, the turn itself, which the request waits for even once its client has gone
    (`None`: nothing runs)."""

    events: AsyncIterator[list[Event]]
    turn: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class TurnHost:
    """What the process serving turns lends each of them: its services and event client, the
    deployment's assistants, and the set of turns still running, which its shutdown waits
    for."""

    services: Services
    events: EventSender
    assistants: Assistants
    turns: TurnTasks


def new_turn(
    settings: Settings,
    assistant: Assistant,
    *,
    user_id: UserId,
    chat_id: ChatId,
    content: str,
    user_message_id: MessageId | None = None,
    edit: Edit | None = None,
    assistant_names: dict[str, str] | None = None,
    owns_message: bool = True,
) -> Turn:
    """A turn of `assistant` answering `content`: its reply, run and job get new ids; the
    user's message gets one too unless `user_message_id` names it. `assistant_names` and
    `owns_message`: as Turn says."""
    return Turn(
        user_id=user_id,
        chat_id=chat_id,
        assistant_id=assistant.id,
        thread_id=thread_key(chat_id, assistant.id),
        user_message_id=user_message_id or MessageId(uuid.uuid4()),
        reply_id=MessageId(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
        content=content,
        model_spec=turn_model_spec(assistant, settings),
        job_key=str(uuid.uuid4()),
        edit=edit,
        assistant_names=assistant_names or {},
        owns_message=owns_message,
    )


def turn_limits(settings: Settings) -> TurnLimits:
    return TurnLimits(
        max_active=settings.max_active_turns_per_user,
        per_minute=settings.max_turns_per_minute,
        lease_s=settings.turn_lease_s,
        daily_tokens=settings.max_user_daily_tokens,
        job_lease_s=settings.job_lease_s,
    )


async def stream_turn(
    turn: Turn,
    strategy: Strategy,
    claims: Claims,
    host: TurnHost,
    *,
    started: float,
    others: Sequence[Turn] = (),
    begun: Begun | None = None,
    taken: bool = False,
) -> TurnStream:
    """Start `turn` (its message stored, the chat's slot taken by `strategy`) and stream it;
    `others`, the turns of the further assistants the message addresses, start with it in the
    background. `started`: when its request began (perf_counter); `begun`: the turn's trace and
    history load, when begun with its route; `taken`: the turn started already, alone, its
    slot taken (turns/opened.py)."""
    pool = await host.services.pool()
    if begun is None:
        begun = begin(host, turn)
    else:
        begun.span.set_attributes(turn.attributes)
    span = begun.span
    turn = turn.model_copy(update={"trace": telemetry.carrier(span)})
    others = [o.model_copy(update={"trace": turn.trace}) for o in others]
    if taken:
        run, slot = begun.run, Slot(queued=False)
    else:
        run, slot = await _start(pool, turn, strategy, claims, host, span, others, begun.run)
    if slot.steered is not None or slot.queued:
        drop_task(run)
        await _others_go(host, turn.chat_id, others, slot)
        span.set_attribute("handoff.steered" if slot.steered else "handoff.queued", True)
        span.end()
        if slot.steered is not None:
            return _steered(turn, slot.steered)
        return _queued(turn, "enqueue" if strategy == "steer" else None)
    if slot.interrupted is not None:
        _stop(host, turn.chat_id, turn.assistant_id, slot.interrupted)

    async def quick(emit: Emit) -> None:
        quick_path = run_turn(
            turn, host.services, host.events, emit, run=run, span=span, started=started
        )
        if not others and not slot.others_interrupted:
            await quick_path
            return
        # Not one after another: the others' turns begin while the first streams.
        await asyncio.gather(quick_path, _others_go(host, turn.chat_id, others, slot))

    return _relay(host.turns, quick)


async def _others_go(host: TurnHost, chat_id: ChatId, others: Sequence[Turn], slot: Slot) -> None:
    """The further addressees' turns begin: each queued one's event is sent (the outbox relay
    sends it should this fail), and a job this message interrupted is told to stop."""
    for assistant_id, canceled in slot.others_interrupted.items():
        _stop(host, chat_id, assistant_id, canceled)
    if not others:
        return
    pool = await host.services.pool()
    for other in others:
        await send_next(pool, Next(host.events, chat_id, other.assistant_id))


def _stop(host: TurnHost, chat_id: ChatId, assistant_id: str, stopped: CanceledJob) -> None:
    """Tell the background run of a job this message canceled to stop: not awaited, so the
    new turn's first token does not wait for it. A quick path finds its slot gone itself."""
    if stopped.reply_id is None or stopped.quick:
        return
    stop = send_cancel(
        host.events, chat_id=chat_id, assistant_id=assistant_id, reply_id=stopped.reply_id
    )
    _keep(host.turns, asyncio.create_task(stop))


async def _start(
    pool: Pool,
    turn: Turn,
    strategy: Strategy,
    claims: Claims,
    host: TurnHost,
    span: Span,
    others: Sequence[Turn],
    run: asyncio.Task[Run],
) -> tuple[asyncio.Task[Run], Slot]:
    """Take the chat's slot with the user's message, while the thread's history loads (`run`:
    both stand between the request and its first token and neither needs the other). If the
    chat turns out not to be the caller's, the history is dropped unread: none of it reaches
    the response."""
    with trace.use_span(span):
        try:
            slot = await start_turn(
                pool,
                claims,
                turn,
                strategy=strategy,
                turn_limits=turn_limits(host.services.settings),
                others=others,
            )
        except BaseException:
            drop_task(run)
            span.end()
            raise
    return run, slot


def _queued(turn: Turn, strategy: str | None) -> TurnStream:
    """A turn that waits behind the active job: its reply streams in the background later.
    `strategy` says how it was taken when that differs from what was asked (a steer that
    could not join a quick path is enqueued)."""
    metadata = turn.stream_metadata()
    if strategy:
        metadata["strategy"] = strategy
    return _fixed([("metadata", metadata), ("handoff", turn.handoff_event(strategy))])


def _steered(turn: Turn, steered: SteeredJob) -> TurnStream:
    """A message that joined the running job: that job's reply is the one to follow."""
    reply = str(steered.reply_id)
    metadata = {**turn.stream_metadata(), "assistantMessageId": reply, "strategy": "steer"}
    handoff = {
        "assistantMessageId": reply,
        "eventId": steered.job_key,
        "status": "steered",
        "strategy": "steer",
    }
    return _fixed([("metadata", metadata), ("handoff", handoff)])


def posted(chat_id: ChatId, message_id: MessageId) -> TurnStream:
    """The stream of a message posted to a shared chat that names no assistant: stored, and
    answered by nobody."""
    ids = {"chatId": str(chat_id), "userMessageId": str(message_id), "assistantMessageId": None}
    return _fixed(
        [("metadata", {**ids, "assistantId": None}), ("done", {**ids, "status": "posted"})]
    )


def _fixed(events: list[Event]) -> TurnStream:
    async def stream() -> AsyncIterator[list[Event]]:
        yield events

    return TurnStream(stream())


def _relay(tasks: TurnTasks, turn: Callable[[Emit], Coroutine[Any, Any, None]]) -> TurnStream:
    """Run the turn detached from the response, which relays what it emits: the turn completes
    even if the client disconnects."""
    queue: asyncio.Queue[Event | None] = asyncio.Queue()

    async def emit(event: str, data: Mapping[str, object]) -> None:
        queue.put_nowait((event, data))

    task = asyncio.create_task(turn(emit))
    _keep(tasks, task)
    # The stream stays open until the turn's work is done (the handoff event sent), so a
    # platform that freezes the process once the response ends cannot freeze it half-way.
    task.add_done_callback(lambda _: queue.put_nowait(None))

    async def stream() -> AsyncIterator[list[Event]]:
        while (item := await queue.get()) is not None:
            # What the turn emitted meanwhile goes out with it, in one write: a model that
            # streams faster than the response is sent costs a write a batch, not one a token.
            # The first token goes alone, as nothing else is waiting when it comes.
            batch = [item]
            while not queue.empty() and (item := queue.get_nowait()) is not None:
                batch.append(item)
            yield batch
            if item is None:
                break
        # Before the response ends, after which Lambda may freeze the process.
        await telemetry.flush_on_lambda()

    return TurnStream(stream(), turn=task)


def _keep(tasks: TurnTasks, task: asyncio.Task[Any]) -> None:
    """Hold a detached task until it ends; the app's shutdown waits for what is held."""
    tasks.add(task)
    task.add_done_callback(tasks.discard)
