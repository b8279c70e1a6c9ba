"""POST /api/chat/respond: the quick path over Server-Sent Events."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from opentelemetry import trace
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.types import Receive, Scope, Send

from agent.model import model_config
from agent.threads import DEFAULT_ASSISTANT_ID, thread_key
from handlers.auth import AuthUser
from handlers.deps import CurrentUser, ServicesDep
from handlers.errors import ERROR_RESPONSES, LIMIT_RESPONSES, ApiError
from handlers.fields import NO_NUL, AssistantId
from handlers.sse import SSE_HEADERS, sse
from infra import telemetry
from infra.events import send_cancel
from infra.runtime import Services
from infra.settings import Settings
from infra.store import branches
from infra.store.branches import Edit
from infra.store.ids import ChatId, MessageId, client_message_id
from infra.store.limits import TurnLimits
from infra.store.steers import SteeredJob
from turns.engine import load_run
from turns.quick import Emit, run_turn
from turns.start import Strategy, start_turn
from turns.turn import Turn

router = APIRouter()


class RespondRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    chat_id: UUID
    content: Annotated[str, Field(min_length=1), NO_NUL]
    # The client's own id for its message, to send it again without doubling it: scoped to the
    # chat, it names the stored message through `client_message_id`, which `metadata` returns.
    user_message_id: UUID | None = None
    assistant_id: AssistantId = DEFAULT_ASSISTANT_ID
    # A user message of this chat and assistant to replace: the turn forks the thread from the
    # checkpoint that message's turn started from.
    edit_of: UUID | None = None
    # While a job of this chat and assistant is active: refuse (409), cancel it, wait, or join
    # it (`steer`: a background job's next round sees the message).
    multitask_strategy: Strategy = "reject"


def _discard(task: asyncio.Task[Any]) -> None:
    """Retrieve a dropped task's outcome, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _queued_response(turn: Turn, strategy: str | None = None) -> StreamingResponse:
    """A turn that waits behind the active job: its reply streams in the background later.
    `strategy` says how it was taken when that differs from what was asked (a steer that
    could not join a quick path is enqueued)."""
    metadata: dict[str, str] = turn.stream_metadata()
    if strategy:
        metadata["strategy"] = strategy
    return _events_response([("metadata", metadata), ("handoff", turn.handoff_event(strategy))])


def _steered_response(turn: Turn, steered: SteeredJob) -> StreamingResponse:
    """A message that joined the running job: that job's reply is the one to follow."""
    metadata = {
        **turn.stream_metadata(),
        "assistantMessageId": str(steered.reply_id),
        "strategy": "steer",
    }
    handoff = {
        "assistantMessageId": str(steered.reply_id),
        "eventId": steered.job_key,
        "status": "steered",
        "strategy": "steer",
    }
    return _events_response([("metadata", metadata), ("handoff", handoff)])


def _events_response(events: list[tuple[str, dict[str, str]]]) -> StreamingResponse:
    body = [sse(name, data) for name, data in events]

    async def stream() -> AsyncIterator[bytes]:
        for item in body:
            yield item

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


@router.post(
    "/api/chat/respond",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **ERROR_RESPONSES, **LIMIT_RESPONSES},
)
async def respond(
    body: RespondRequest, user: CurrentUser, services: ServicesDep, request: Request
) -> StreamingResponse:
    started = time.perf_counter()
    settings = services.settings
    if len(body.content) > settings.max_content_chars:
        raise ApiError(413, "content_too_large", "The message is too long.")
    if not body.content.strip():
        raise ApiError(422, "invalid_request", "content: must not be blank")
    pool = await services.pool()
    edit = None
    if body.edit_of is not None:
        # Read under RLS first: it names the checkpoint the history comes from.
        edit = await branches.edit_target(
            pool,
            user.claims,
            chat_id=ChatId(body.chat_id),
            assistant_id=body.assistant_id,
            message_id=body.edit_of,
        )
    turn = _new_turn(body, user, settings, edit)
    return await stream_turn(turn, body.multitask_strategy, user, services, request, started)


async def stream_turn(
    turn: Turn,
    strategy: Strategy,
    user: AuthUser,
    services: Services,
    request: Request,
    started: float,
) -> StreamingResponse:
    """Start `turn` (its message stored, the chat's slot taken by `strategy`) and stream it:
    what respond does once it knows the turn, and a regenerated reply too."""
    settings = services.settings
    pool = await services.pool()
    # The turn's trace begins here and goes with it, into the background too.
    span = telemetry.tracer.start_span(
        "invoke_agent handoff",
        attributes={"gen_ai.operation.name": "invoke_agent", **turn.attributes},
    )
    turn = turn.model_copy(update={"trace": telemetry.carrier(span)})
    tools = request.app.state.tools
    with trace.use_span(span):
        # Both stand between the request and its first token and neither needs the other, so
        # the thread's history loads while the user's message is stored. If the chat turns out
        # not to be the caller's, the history is dropped unread: none of it reaches the response.
        run = asyncio.create_task(load_run(pool, turn, tools, settings))
        try:
            slot = await start_turn(
                pool,
                user.claims,
                turn,
                strategy=strategy,
                turn_limits=turn_limits(settings),
            )
        except BaseException:
            _drop(run)
            span.end()
            raise
    if slot.steered is not None:
        _drop(run)
        span.set_attribute("handoff.steered", True)
        span.end()
        return _steered_response(turn, slot.steered)
    if slot.queued:
        _drop(run)
        span.set_attribute("handoff.queued", True)
        span.end()
        fallback = "enqueue" if strategy == "steer" else None
        return _queued_response(turn, fallback)
    state = request.app.state
    stopped = slot.interrupted
    if stopped is not None and stopped.message_id is not None and not stopped.quick:
        # Not awaited: the new turn's first token does not wait for the old run's stop.
        stop = send_cancel(
            state.events,
            chat_id=turn.chat_id,
            assistant_id=turn.assistant_id,
            message_id=stopped.message_id,
        )
        _keep(state.turns, asyncio.create_task(stop))
    return _relay(
        state.turns,
        lambda emit: run_turn(
            turn, services, state.events, emit, run=run, span=span, started=started
        ),
    )


def _relay(
    tasks: set[asyncio.Task[Any]], turn: Callable[[Emit], Coroutine[Any, Any, None]]
) -> TurnResponse:
    """Run the turn detached from the response, which relays what it emits: the turn completes
    even if the client disconnects."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def emit(event: str, data: dict[str, Any]) -> None:
        queue.put_nowait(sse(event, data))

    task = asyncio.create_task(turn(emit))
    _keep(tasks, task)
    # The stream stays open until the turn's work is done (the handoff event sent), so a
    # platform that freezes the process once the response ends cannot freeze it half-way.
    task.add_done_callback(lambda _: queue.put_nowait(None))

    async def stream() -> AsyncIterator[bytes]:
        while (item := await queue.get()) is not None:
            yield item
        # Before the response ends, after which Lambda may freeze the process.
        await telemetry.flush_on_lambda()

    return TurnResponse(stream(), turn=task)


def turn_limits(settings: Settings) -> TurnLimits:
    return TurnLimits(
        max_active=settings.max_active_turns_per_user,
        per_minute=settings.max_turns_per_minute,
        lease_s=settings.turn_lease_s,
        daily_tokens=settings.max_user_daily_tokens,
    )


def _new_turn(body: RespondRequest, user: AuthUser, settings: Settings, edit: Edit | None) -> Turn:
    chat_id = ChatId(body.chat_id)
    return Turn(
        user_id=user.id,
        chat_id=chat_id,
        assistant_id=body.assistant_id,
        thread_id=thread_key(chat_id, body.assistant_id),
        user_message_id=(
            client_message_id(chat_id, body.user_message_id)
            if body.user_message_id is not None
            else MessageId(uuid.uuid4())
        ),
        root_message_id=MessageId(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
        content=body.content,
        model_spec=model_config(settings.model, token_delay_ms=settings.scripted_token_delay_ms),
        job_key=str(uuid.uuid4()),
        edit=edit,
    )


def _keep(tasks: set[asyncio.Task[Any]], task: asyncio.Task[Any]) -> None:
    """Hold a detached task until it ends; the app's shutdown waits for what is held."""
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def _drop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    task.add_done_callback(_discard)


class TurnResponse(StreamingResponse):
    """The SSE stream of a turn, whose request lasts until the turn's work is done.

    A client that hangs up ends the stream early, but the request itself still waits for the
    turn to be stored and handed off: on Lambda, the end of the request is when the platform may
    freeze the process, and a turn frozen half-way would wait for the next invocation, or for
    ever.
    """

    def __init__(self, content: AsyncIterator[bytes], *, turn: asyncio.Task[None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers=SSE_HEADERS)
        self.turn = turn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await asyncio.wait({self.turn})
