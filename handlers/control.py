"""Control of a running conversation: cancel its background job."""

from __future__ import annotations

import logging
from uuid import UUID

import inngest
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent.threads import ASSISTANT_ID_PATTERN, DEFAULT_ASSISTANT_ID
from handlers.deps import CurrentUser, ServicesDep
from handlers.respond import ERROR_RESPONSES
from infra.chat_store import ChatId
from infra.events import CANCEL_EVENT
from infra.job_control import cancel_active_job

logger = logging.getLogger(__name__)

router = APIRouter()


class CancelRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    assistant_id: str = Field(default=DEFAULT_ASSISTANT_ID, pattern=ASSISTANT_ID_PATTERN.pattern)


class CancelResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    canceled: bool = Field(description="False when no background job was running.")
    assistant_message_id: UUID | None = None


@router.post(
    "/api/chat/{chat_id}/cancel",
    status_code=202,
    response_model=CancelResponse,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def cancel(
    chat_id: UUID,
    user: CurrentUser,
    services: ServicesDep,
    request: Request,
    body: CancelRequest | None = None,
) -> CancelResponse:
    """Stop the chat's background job: its message ends `canceled` with the text shown so far.

    Canceling an idle chat changes nothing and is still accepted.
    """
    assistant_id = (body or CancelRequest()).assistant_id
    canceled = await cancel_active_job(
        await services.pool(), user.claims, chat_id=ChatId(chat_id), assistant_id=assistant_id
    )
    if canceled is None:
        return CancelResponse(canceled=False)
    data = {
        "chatId": str(chat_id),
        "assistantId": assistant_id,
        "messageId": str(canceled.message_id),
    }
    try:
        await request.app.state.events.send(inngest.Event(name=CANCEL_EVENT, data=data))
    except Exception:
        # The job already ended in the database: the run stops at its next write instead.
        logger.exception("chat/cancel not sent", extra={"chat_id": str(chat_id)})
    return CancelResponse(canceled=True, assistant_message_id=canceled.message_id)
