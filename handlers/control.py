"""Control of a running conversation: cancel its background job, answer a tool approval."""

from __future__ import annotations

import logging
from typing import Annotated
from uuid import UUID

import inngest
from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent.threads import ASSISTANT_ID_PATTERN, DEFAULT_ASSISTANT_ID
from handlers.deps import CurrentUser, ServicesDep
from handlers.errors import ERROR_RESPONSES
from infra.events import APPROVAL_EVENT, send_cancel
from infra.store.approvals import record_decision
from infra.store.ids import ChatId
from infra.store.jobs import cancel_active
from turns.start import send_queued_turns

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
    canceled = await cancel_active(
        await services.pool(), user.claims, chat_id=ChatId(chat_id), assistant_id=assistant_id
    )
    if canceled is None:
        return CancelResponse(canceled=False)
    events = request.app.state.events
    # A turn still on its quick path has no run to stop: it finds its slot gone and stops.
    if canceled.message_id is not None and not canceled.quick:
        await send_cancel(
            events, chat_id=chat_id, assistant_id=assistant_id, message_id=canceled.message_id
        )
    await send_queued_turns(await services.pool(), events, ChatId(chat_id), assistant_id)
    return CancelResponse(canceled=True, assistant_message_id=canceled.message_id)


class ApprovalRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    approved: bool
    note: str | None = Field(default=None, max_length=2000)


class ApprovalResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    tool_call_id: str
    approved: bool


@router.post(
    "/api/chat/{chat_id}/approvals/{tool_call_id}",
    status_code=202,
    response_model=ApprovalResponse,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def approve(
    chat_id: UUID,
    tool_call_id: Annotated[str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")],
    body: ApprovalRequest,
    user: CurrentUser,
    services: ServicesDep,
    request: Request,
) -> ApprovalResponse:
    """Approve or reject a tool call the chat's background job is waiting on.

    Approved, the tool runs; rejected, the model is told so (with the note) and goes on.
    """
    message_id = await record_decision(
        await services.pool(),
        user.claims,
        chat_id=ChatId(chat_id),
        call_id=tool_call_id,
        approved=body.approved,
        note=body.note,
    )
    data = {"chatId": str(chat_id), "messageId": str(message_id), "toolCallId": tool_call_id}
    try:
        await request.app.state.events.send(inngest.Event(name=APPROVAL_EVENT, data=data))
    except Exception:
        # The decision is recorded: the waiting run reads it when its wait ends.
        logger.exception("chat/tool_approval not sent", extra={"chat_id": str(chat_id)})
    return ApprovalResponse(tool_call_id=tool_call_id, approved=body.approved)
