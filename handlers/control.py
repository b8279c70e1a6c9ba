"""Control of a running conversation: cancel, pause or resume its background job, answer a
tool approval or a question of the model."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from handlers.deps import AssistantsDep, CurrentUser, EventsDep, ServicesDep, strict_router
from handlers.error_responses import ERROR_RESPONSES
from handlers.errors import ApiError
from handlers.fields import NO_NUL, AssistantId, CallIdPath
from infra.events import (
    ANSWER_EVENT,
    APPROVAL_EVENT,
    RESUME_EVENT,
    AnswerData,
    ApprovalData,
    ResumeData,
    send_control,
)
from infra.store import pauses
from infra.store.approvals import record_decision
from infra.store.ids import ChatId
from infra.store.questions import record_answer
from turns import endings

router = strict_router()


class CancelRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    assistant_id: AssistantId = None


class CancelResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    canceled: bool = Field(description="False when no background job was running.")
    reply_id: UUID | None = Field(default=None, alias="assistantMessageId")


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
    events: EventsDep,
    assistants: AssistantsDep,
    body: CancelRequest | None = None,
) -> CancelResponse:
    """Stop the chat's background job: its message ends `canceled` with the text shown so far.

    Canceling an idle chat changes nothing and is still accepted.
    """
    assistant_id = assistants.pick((body or CancelRequest()).assistant_id).id
    then = endings.Next(events, ChatId(chat_id), assistant_id)
    canceled = await endings.cancel(await services.pool(), then, user.claims)
    if canceled is None:
        return CancelResponse(canceled=False)
    return CancelResponse(canceled=True, reply_id=canceled.reply_id)


class ApprovalRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    approved: bool
    note: Annotated[str | None, Field(max_length=2000), NO_NUL] = None


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
    tool_call_id: CallIdPath,
    body: ApprovalRequest,
    user: CurrentUser,
    services: ServicesDep,
    events: EventsDep,
) -> ApprovalResponse:
    """Approve or reject a tool call the chat's background job is waiting on.

    Approved, the tool runs; rejected, the model is told so (with the note) and goes on.
    """
    reply_id = await record_decision(
        await services.pool(),
        user.claims,
        chat_id=ChatId(chat_id),
        call_id=tool_call_id,
        approved=body.approved,
        note=body.note,
    )
    # The decision is recorded: should the event be lost, the run reads it when its wait ends.
    data = ApprovalData(chatId=str(chat_id), messageId=str(reply_id), toolCallId=tool_call_id)
    await send_control(events, APPROVAL_EVENT, data)
    return ApprovalResponse(tool_call_id=tool_call_id, approved=body.approved)


class AnswerRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    answer: Annotated[str, Field(min_length=1, max_length=4000), NO_NUL]


class AnswerResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    question_id: str
    answered: bool


@router.post(
    "/api/chat/{chat_id}/answers/{question_id}",
    status_code=202,
    response_model=AnswerResponse,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def answer_question(
    chat_id: UUID,
    question_id: CallIdPath,
    body: AnswerRequest,
    user: CurrentUser,
    services: ServicesDep,
    events: EventsDep,
) -> AnswerResponse:
    """Answer the question the chat's background job is waiting on (`pendingQuestion`).

    The answer is the result of the model's question (a call of a tool marked `asks_user`).
    409 when no such question waits or it has its answer already.
    """
    if not body.answer.strip():
        raise ApiError(422, "invalid_request", "answer: must not be blank")
    reply_id = await record_answer(
        await services.pool(),
        user.claims,
        chat_id=ChatId(chat_id),
        question_id=question_id,
        answer=body.answer,
    )
    # The answer is recorded: should the event be lost, the run reads it when its wait ends.
    data = AnswerData(chatId=str(chat_id), messageId=str(reply_id), questionId=question_id)
    await send_control(events, ANSWER_EVENT, data)
    return AnswerResponse(question_id=question_id, answered=True)


class PauseRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    assistant_id: AssistantId = None


class PauseResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    pausing: bool = Field(description="The job pauses at its next step boundary.")
    reply_id: UUID | None = Field(default=None, alias="assistantMessageId")


@router.post(
    "/api/chat/{chat_id}/pause",
    status_code=202,
    response_model=PauseResponse,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def pause(
    chat_id: UUID,
    user: CurrentUser,
    services: ServicesDep,
    assistants: AssistantsDep,
    body: PauseRequest | None = None,
) -> PauseResponse:
    """Pause the chat's running job at its next step boundary (before its next tool step or
    model round): job and reply then show `paused`, and the job keeps the chat's slot until it
    is resumed, canceled, or PAUSE_TIMEOUT_S passes. 409 when nothing runs."""
    reply_id = await pauses.request_pause(
        await services.pool(),
        user.claims,
        chat_id=ChatId(chat_id),
        assistant_id=assistants.pick((body or PauseRequest()).assistant_id).id,
    )
    return PauseResponse(pausing=True, reply_id=reply_id)


class ResumeRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    assistant_id: AssistantId = None
    instruction: Annotated[str | None, Field(max_length=4000), NO_NUL] = None


class ResumeResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    resumed: bool
    reply_id: UUID = Field(alias="assistantMessageId")


@router.post(
    "/api/chat/{chat_id}/resume",
    status_code=202,
    response_model=ResumeResponse,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def resume(
    chat_id: UUID,
    user: CurrentUser,
    services: ServicesDep,
    events: EventsDep,
    assistants: AssistantsDep,
    body: ResumeRequest | None = None,
) -> ResumeResponse:
    """Resume the chat's paused job; `instruction`, if given, goes to every later model round
    of its turn. 409 when no job of the chat is paused."""
    body = body or ResumeRequest()
    instruction = body.instruction.strip() if body.instruction else None
    reply_id = await pauses.resume(
        await services.pool(),
        user.claims,
        chat_id=ChatId(chat_id),
        assistant_id=assistants.pick(body.assistant_id).id,
        instruction=instruction or None,
    )
    # The job is resumed in the database: should the event be lost, the run finds so when its
    # wait ends.
    data = ResumeData(chatId=str(chat_id), messageId=str(reply_id))
    await send_control(events, RESUME_EVENT, data)
    return ResumeResponse(resumed=True, reply_id=reply_id)
