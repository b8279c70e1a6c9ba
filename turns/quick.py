"""The quick path: stream the agent's first tokens, then finish the turn or hand it off.

Runs detached from the HTTP response, so a client that goes away mid-stream still gets its turn
persisted and handed off; the response only relays what this emits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from langgraph.types import StateSnapshot
from opentelemetry import trace
from opentelemetry.trace import Span

from agent.errors import classify
from agent.graph import TOOLS_NODE, state_values
from agent.snapshot import (
    APOLOGY,
    INCOMPATIBLE_VERSION,
    INTERRUPTED,
    STOPPED_TEXT,
    AgentSnapshot,
    failed_text,
    render_agent_snapshot,
)
from agent.state import IncompatibleCheckpoint
from agent.usage import turn_usage
from infra import telemetry
from infra.db import Conn, Pool, PoolClosed
from infra.events import EventSender, TurnPayload, send_handoff
from infra.runtime import Services
from infra.store import erased_turns, jobs, outbox
from infra.store.drafts import DraftWriter
from infra.store.messages import MessageMetadata
from turns import endings
from turns.engine import Run, opening, store_run
from turns.turn import Turn

logger = logging.getLogger(__name__)

Emit = Callable[[str, Mapping[str, object]], Awaitable[None]]


class Interrupted(RuntimeError):
    """The turn lost its chat's slot (a cancel, or a message sent with `interrupt`)."""


class _SlotLost(RuntimeError):
    """Raised inside the storing transaction to roll it back."""


async def run_turn(
    turn: Turn,
    services: Services,
    events: EventSender,
    emit: Emit,
    *,
    run: Awaitable[Run],
    span: Span,
    started: float,
) -> None:
    """Stream the turn through `emit`. `run` may still be loading (the route starts it while it
    stores the user's message); `span` is the turn's trace span, which ends with this;
    `started`, when its request began (perf_counter)."""
    with trace.use_span(span, end_on_exit=True):
        await _run_turn(turn, services, events, emit, run, started)


async def _run_turn(
    turn: Turn,
    services: Services,
    events: EventSender,
    emit: Emit,
    run: Awaitable[Run],
    started: float,
) -> None:
    deadline = asyncio.get_running_loop().time() + services.settings.quick_budget_s
    await emit("metadata", turn.stream_metadata())
    pool = await services.pool()
    erased = asyncio.Event()
    lease = asyncio.create_task(
        _renew_lease(pool, turn, services.settings.turn_lease_s / 3, erased)
    )
    emit = _until(erased, emit)
    # Another tab, a reload and Realtime subscribers see the text as it streams; it holds all
    # that this stream showed, which a failure keeps.
    draft = DraftWriter.for_reply(
        pool, services.settings, reply_id=turn.reply_id, chat_id=turn.chat_id, best_effort=True
    )
    try:
        if await _stream_and_store(
            turn, services, events, emit, await run, draft, deadline, started
        ):
            return  # handed off: the job goes on in the background
    except Interrupted:
        await emit("error", {"code": "interrupted", "message": INTERRUPTED})
    except PoolClosed:
        # The process stopped while the database did not answer (handlers/shutdown.py): nothing
        # can be stored now. The reply ends interrupted once its silent slot is found.
        logger.warning("the process stopped before the turn was stored", extra=turn.log)
        await emit("error", {"code": "server_stopping", "message": STOPPED_TEXT})
        return
    except IncompatibleCheckpoint:
        logger.exception("checkpoint from an incompatible version", extra=turn.log)
        await _record_failure(turn, services, INCOMPATIBLE_VERSION, "incompatible_version")
        await emit("error", {"code": "incompatible_version", "message": INCOMPATIBLE_VERSION})
    except Exception as exc:
        draft.discard()
        failure = classify(exc)
        if failure is None:
            logger.exception("quick path failed", extra=turn.log)
            code, text = "internal", APOLOGY
        else:
            logger.warning("model call failed", extra={**turn.log, **failure.log()})
            code, text = failure.kind, failure.user_text
        # As every other ending, a failure keeps what was shown, and says what happened after.
        ended = await _record_failure(turn, services, text, code, shown=draft.text)
        await emit("error", {"code": code, "message": text, "content": ended})
    finally:
        lease.cancel()
    # The turn's job ended: a message that waited behind it now holds the slot.
    await endings.send_next(pool, endings.Next(events, turn.chat_id, turn.assistant_id))


def _until(erased: asyncio.Event, emit: Emit) -> Emit:
    """`emit`, until the turn's reply or chat is deleted: then the stream relays nothing more.
    The model's answer still runs to its end, so that what it used is known and recorded."""

    async def relay(event: str, data: Mapping[str, object]) -> None:
        if not erased.is_set():
            await emit(event, data)

    return relay


async def _renew_lease(pool: Pool, turn: Turn, every_s: float, erased: asyncio.Event) -> None:
    """Keep the turn's slot while it streams: a slot not renewed for the lease is taken for
    dead (turns/start.py). Ends once the turn no longer holds the slot, setting `erased` when
    its job was deleted with its reply or chat (infra/store/erased_turns.py)."""
    while True:
        await asyncio.sleep(every_s)
        try:
            async with pool.connection() as conn:
                if not await jobs.hold(conn, turn.job_key, turn.run_id):
                    if await erased_turns.is_erased(conn, turn.job_key):
                        erased.set()
                    return
        except Exception:
            logger.warning("could not renew the turn's lease", extra=turn.log, exc_info=True)


async def _stream_and_store(
    turn: Turn,
    services: Services,
    events: EventSender,
    emit: Emit,
    run: Run,
    draft: DraftWriter,
    deadline: float,
    started: float,
) -> bool:
    """True when the turn handed off to the background."""
    pool = await services.pool()
    await _stream(turn, emit, run, draft, deadline, started)
    state = await run.state()
    snapshot = render_agent_snapshot(state_values(state))
    if snapshot.cut_short == "time":
        logger.warning("quick path stopped at its time budget", extra=turn.log)
    handing_off = TOOLS_NODE in state.next
    if handing_off:
        await draft.flush()  # shown, not cut, while the tools run
    else:
        draft.discard()  # the content is final next
    try:
        with telemetry.tracer.start_as_current_span("persist"):
            async with pool.connection() as conn, conn.transaction():
                payload = await _store(conn, turn, run, state, snapshot)
    except _SlotLost:
        # Canceled, or another message took over: the user keeps what they saw, the thread
        # gets nothing of this turn. What the model used was spent all the same. Deleted with
        # its reply or chat: nothing is kept, and nobody is told.
        used = turn_usage(state_values(state))
        if await endings.stop_erased(pool, turn, turn.job_key, used=used, snapshot=snapshot):
            return False
        await endings.keep_shown(pool, turn, draft.text, used=used, snapshot=snapshot)
        raise Interrupted from None
    if payload is None:
        done = {"assistantMessageId": str(turn.reply_id), "status": "completed"}
        await emit("done", {**done, "content": snapshot.text})
        return False
    # Committed: the turn is durable, so the client hears it at once. The job row is the
    # outbox: if the send below fails, event_sent_at stays null and the outbox relay re-sends
    # with the same id, which Inngest deduplicates.
    await emit("handoff", turn.handoff_event())
    try:
        with telemetry.tracer.start_as_current_span(
            "handoff", attributes={"handoff.job.id": turn.job_key}
        ):
            await send_handoff(events, turn.job_key, payload)
            await outbox.mark_sent(pool, [turn.job_key])
        telemetry.HANDOFF_LATENCY.record(telemetry.since(started))
    except Exception:
        logger.exception("handoff event not sent; left in the outbox", extra=turn.log)
    return True


async def _stream(
    turn: Turn, emit: Emit, run: Run, draft: DraftWriter, deadline: float, started: float
) -> None:
    """Relay the answer's tokens, each then into the reply's `draft`, until the answer pauses,
    ends or runs out of time: the draft then holds all that was shown."""
    texts = run.ahead or run.text(await opening(run, turn), deadline)
    async for text in texts:
        await emit("token", {"text": text})
        if not draft.text:
            telemetry.FIRST_TOKEN.record(telemetry.since(started))
            # The response sends the token before the draft's first write takes the loop.
            await asyncio.sleep(0)
        await draft.append(text)
    telemetry.DRAFT_WRITES.record(draft.writes, {"handoff.path": "quick"})


async def _store(
    conn: Conn, turn: Turn, run: Run, state: StateSnapshot, snapshot: AgentSnapshot
) -> TurnPayload | None:
    """The turn's checkpoints, reply and job transition in `conn`'s transaction; the job's
    payload when it hands off. _SlotLost when the turn no longer holds its chat's slot."""
    handing_off = TOOLS_NODE in state.next
    # The job's row first, as a cancel locks it before the reply: the two never wait on each
    # other in opposite orders (a deadlock). A turn that lost its slot stops here. A turn that
    # ends here takes its job's transition with the lock; one that hands off, once its payload
    # names the checkpoint it paused at.
    if not await (
        jobs.hold(conn, turn.job_key, turn.run_id)
        if handing_off
        else jobs.complete_quick(conn, turn.job_key, turn.run_id)
    ):
        raise _SlotLost
    marks = await store_run(conn, run, turn, opened=True)
    used = turn_usage(state_values(state))
    metadata: MessageMetadata = {**marks, "snapshot": snapshot.to_metadata(), "usage": used}
    payload = turn.paused_at(marks.get("checkpointId")).to_data() if handing_off else None
    if not await endings.settle_quick(
        conn, turn, snapshot=snapshot, metadata=metadata, used=used, payload=payload
    ):
        raise _SlotLost
    return payload


async def _record_failure(
    turn: Turn, services: Services, text: str, code: str, *, shown: str = ""
) -> str:
    """The user's message stays; its reply, in `error`, keeps what was `shown` and says the
    turn failed in plain words, and the chat's slot is free again. The job keeps only the code.
    The reply's text as it ended."""
    try:
        pool = await services.pool()
        ended = await endings.fail(
            pool, job_key=turn.job_key, user_text=text, error=code, shown=shown
        )
    except Exception:
        logger.exception("could not record the failed turn", extra=turn.log)
        ended = None
    return ended if ended is not None else failed_text(shown, text)
