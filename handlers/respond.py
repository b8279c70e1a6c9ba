"""POST /api/chat/respond: the quick path over Server-Sent Events."""

from __future__ import annotations

import time
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from handlers.deps import CurrentUser, TurnHostDep
from handlers.errors import ERROR_RESPONSES, LIMIT_RESPONSES, ApiError
from handlers.fields import NO_NUL, AssistantId
from handlers.sse import event_stream
from infra.store import forks
from infra.store.ids import ChatId, client_message_id
from turns.start import Strategy
from turns.streaming import new_turn, stream_turn

router = APIRouter()


class RespondRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    chat_id: UUID
    content: Annotated[str, Field(min_length=1), NO_NUL]
    # The client's own id for its message, to send it again without doubling it: scoped to the
    # chat, it names the stored message through `client_message_id`, which `metadata` returns.
    user_message_id: UUID | None = None
    # None: the deployment's default assistant.
    assistant_id: AssistantId = None
    # A user message of this chat and assistant to replace: the turn forks the thread from the
    # checkpoint that message's turn started from.
    edit_of: UUID | None = None
    # While a job of this chat and assistant is active: refuse (409), cancel it, wait, or join
    # it (`steer`: a background job's next round sees the message).
    multitask_strategy: Strategy = "reject"


@router.post(
    "/api/chat/respond",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **ERROR_RESPONSES, **LIMIT_RESPONSES},
)
async def respond(body: RespondRequest, user: CurrentUser, host: TurnHostDep) -> StreamingResponse:
    started = time.perf_counter()
    services = host.services
    settings = services.settings
    if len(body.content) > settings.max_content_chars:
        raise ApiError(413, "content_too_large", "The message is too long.")
    if not body.content.strip():
        raise ApiError(422, "invalid_request", "content: must not be blank")
    chat_id = ChatId(body.chat_id)
    assistant = host.assistants.pick(body.assistant_id)
    edit = None
    if body.edit_of is not None:
        # Read under RLS first: it names the checkpoint the history comes from.
        edit = await forks.edit_target(
            await services.pool(),
            user.claims,
            chat_id=chat_id,
            assistant_id=assistant.id,
            message_id=body.edit_of,
        )
    turn = new_turn(
        settings,
        assistant,
        user_id=user.id,
        chat_id=chat_id,
        content=body.content,
        user_message_id=(
            client_message_id(chat_id, body.user_message_id)
            if body.user_message_id is not None
            else None
        ),
        edit=edit,
    )
    stream = await stream_turn(turn, body.multitask_strategy, user.claims, host, started=started)
    return event_stream(stream.events, turn=stream.turn)
