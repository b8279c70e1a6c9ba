"""An edit's cascade, as its editor steers it: go on past the card, or stop it.

The cascade (turns/cascade.py, functions/cascade.py) regenerates the replies that depend on an
edit, CASCADE_LIMIT at a time; past each batch it waits on a card (`status:
awaiting_approval`, in the history as `pendingCascades`) for the editor's decision.
"""

from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from handlers.deps import CurrentUser, EventsDep, ServicesDep, strict_router
from handlers.error_responses import ERROR_RESPONSES
from infra.events import CASCADE_CANCEL_EVENT, CASCADE_DECISION_EVENT, CascadeData, send_control
from infra.store import cascades
from infra.store.ids import ChatId

router = strict_router()


class DecisionRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    approved: bool


class DecisionResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    cascade_id: UUID
    approved: bool


class CancelResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    cascade_id: UUID
    canceled: bool


@router.post(
    "/api/chat/{chat_id}/cascades/{cascade_id}/decision",
    status_code=202,
    response_model=DecisionResponse,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def decide(
    chat_id: UUID,
    cascade_id: UUID,
    body: DecisionRequest,
    user: CurrentUser,
    services: ServicesDep,
    events: EventsDep,
) -> DecisionResponse:
    """Answer the cascade's card: approved, it regenerates the next CASCADE_LIMIT replies;
    declined, the rest stay as they are. 404 when no card of the chat waits under that id."""
    await cascades.decide(
        await services.pool(),
        user.claims,
        chat_id=ChatId(chat_id),
        cascade_id=cascade_id,
        approved=body.approved,
    )
    # The decision is recorded: should the event be lost, the run reads it when its wait ends.
    data = CascadeData(chatId=str(chat_id), cascadeId=str(cascade_id))
    await send_control(events, CASCADE_DECISION_EVENT, data)
    return DecisionResponse(cascade_id=cascade_id, approved=body.approved)


@router.post(
    "/api/chat/{chat_id}/cascades/{cascade_id}/cancel",
    status_code=202,
    response_model=CancelResponse,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def cancel(
    chat_id: UUID, cascade_id: UUID, user: CurrentUser, services: ServicesDep, events: EventsDep
) -> CancelResponse:
    """Stop the cascade before its next regeneration (one running finishes as a turn, or is
    canceled with POST /api/chat/{chatId}/cancel). 404 when it is not running or waiting."""
    await cascades.cancel(
        await services.pool(), user.claims, chat_id=ChatId(chat_id), cascade_id=cascade_id
    )
    data = CascadeData(chatId=str(chat_id), cascadeId=str(cascade_id))
    await send_control(events, CASCADE_CANCEL_EVENT, data)
    return CancelResponse(cascade_id=cascade_id, canceled=True)
