"""A thread's branches: answer a message again, list the branches, choose the active one.

An edit (`editOf` on respond) and a regenerated reply each fork the thread into a new branch;
the history shows the active branch, and the next message continues it
(infra/store/branches.py).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from fastapi import Path
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from handlers.deps import (
    AssistantsDep,
    CurrentUser,
    QueriedAssistant,
    ServicesDep,
    TurnHostDep,
    strict_router,
)
from handlers.error_responses import ERROR_RESPONSES, LIMIT_RESPONSES
from handlers.fields import NO_NUL, AssistantId
from handlers.sse import event_stream
from infra.store import branches, forks
from infra.store.ids import ChatId
from turns.routing import voices
from turns.streaming import new_turn, stream_turn

router = strict_router()

BranchPath = Annotated[str, Path(min_length=1, max_length=64), NO_NUL]


class RegenerateRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    assistant_id: AssistantId = None
    # While a job of this chat and assistant is active: refuse (409), or cancel it. (Waiting
    # for it is not offered: a fork runs from its quick path.)
    multitask_strategy: Literal["reject", "interrupt"] = "reject"


class LatestMessage(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: UUID
    role: str
    content: str
    status: str
    created_at: datetime


class Branch(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str = Field(description="`main`, or the id of the branch's first message.")
    forked_from: UUID | None = Field(
        description="The message the branch replaces: an edited user message, or a reply"
        " answered again; null for `main`."
    )
    created_at: datetime
    latest_message: LatestMessage | None
    active: bool


class Branches(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    active_branch_id: str
    branches: list[Branch]


class ActivateRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    assistant_id: AssistantId = None


class Activated(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    active_branch_id: str


@router.post(
    "/api/chat/{chat_id}/messages/{message_id}/regenerate",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **ERROR_RESPONSES, **LIMIT_RESPONSES},
)
async def regenerate(
    chat_id: UUID,
    message_id: UUID,
    user: CurrentUser,
    host: TurnHostDep,
    body: RegenerateRequest | None = None,
) -> StreamingResponse:
    """A new reply of the assistant to the user message `message_id` names (itself, or the one
    the assistant's reply `message_id` answers; the assistant may be any of its addressees), on
    a new branch of the assistant's thread from the checkpoint its replaced turn began from.
    Streams as respond does; the new branch becomes the assistant's active one."""
    started = time.perf_counter()
    body = body or RegenerateRequest()
    assistant = host.assistants.pick(body.assistant_id)
    pool = await host.services.pool()
    target = await forks.regenerate_target(
        pool, user.claims, chat_id=ChatId(chat_id), assistant_id=assistant.id, message_id=message_id
    )
    turn = new_turn(
        host.services.settings,
        assistant,
        user_id=user.id,
        chat_id=ChatId(chat_id),
        content=target.content,
        user_message_id=target.edit.message_id,
        edit=target.edit,
        # As the replaced turn did, it hears the chat's other voices from before the message.
        assistant_names=await voices(
            pool, host.assistants, chat_id=ChatId(chat_id), user_id=user.id
        ),
    )
    stream = await stream_turn(turn, body.multitask_strategy, user.claims, host, started=started)
    return event_stream(stream.events, turn=stream.turn)


@router.get(
    "/api/chat/{chat_id}/branches",
    response_model=Branches,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def list_branches(
    chat_id: UUID,
    user: CurrentUser,
    services: ServicesDep,
    assistant: QueriedAssistant,
) -> Branches:
    """The thread's branches, oldest first, under RLS. A chat without turns has none."""
    rows = await branches.list_branches(
        await services.pool(), user.claims, chat_id=ChatId(chat_id), assistant_id=assistant.id
    )
    listed = [
        Branch(
            id=row.id,
            forked_from=row.forked_from,
            created_at=row.created_at,
            active=row.active,
            latest_message=(
                LatestMessage(
                    id=row.latest_id,
                    role=row.latest_role,
                    content=row.latest_content,
                    status=row.latest_status,
                    created_at=row.latest_created_at,
                )
                if row.latest_id is not None
                else None
            ),
        )
        for row in rows
    ]
    active = next((b.id for b in listed if b.active), branches.MAIN_BRANCH)
    return Branches(active_branch_id=active, branches=listed)


@router.post(
    "/api/chat/{chat_id}/branches/{branch_id}/activate",
    response_model=Activated,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def activate(
    chat_id: UUID,
    branch_id: BranchPath,
    user: CurrentUser,
    services: ServicesDep,
    assistants: AssistantsDep,
    body: ActivateRequest | None = None,
) -> Activated:
    """Make `branch_id` the active branch: the history shows it, the next message continues it.
    409 while an answer is being prepared in the chat."""
    body = body or ActivateRequest()
    await branches.activate(
        await services.pool(),
        user.claims,
        chat_id=ChatId(chat_id),
        assistant_id=assistants.pick(body.assistant_id).id,
        branch=branch_id,
    )
    return Activated(active_branch_id=branch_id)
