"""The deployment's assistants, and which of them take part in a chat.

GET /api/assistants lists what the code defines (agent/assistants.py); a chat's own list lives in
`public.chat_assistant` (infra/store/assistants.py), changed by its owner through the routes
below, which check each id against the code. Every member of a chat reads its assistants; only
its owner changes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated
from uuid import UUID

from fastapi import Path
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from agent.assistants import Assistant, Assistants
from agent.threads import ASSISTANT_ID_PATTERN
from handlers.deps import AssistantsDep, CurrentUser, ServicesDep, strict_router
from handlers.error_responses import ERROR_RESPONSES, MEMBER_RESPONSES
from handlers.fields import NO_NUL, AssistantIdField
from infra.store import assistants as chat_store
from infra.store.access import user_transaction
from infra.store.chats import require_chat, require_owner
from infra.store.ids import ChatId

router = strict_router()

AssistantIdPath = Annotated[str, Path(pattern=ASSISTANT_ID_PATTERN.pattern), NO_NUL]


class AssistantInfo(BaseModel):
    """An assistant as a person choosing one sees it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    name: str
    description: str
    starters: list[str]


class AssistantList(BaseModel):
    assistants: list[AssistantInfo]


class ChatAssistantInfo(AssistantInfo):
    """An assistant of a chat; the default one answers a message that names none."""

    is_default: bool


class ChatAssistantList(BaseModel):
    assistants: list[ChatAssistantInfo]


class AddAssistant(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    assistant_id: AssistantIdField
    default: bool = False


def info(assistant: Assistant) -> AssistantInfo:
    return AssistantInfo(
        id=assistant.id,
        name=assistant.name,
        description=assistant.description,
        starters=list(assistant.starters),
    )


def chat_list(
    rows: Sequence[chat_store.ChatAssistant], assistants: Assistants
) -> ChatAssistantList:
    """A chat's assistants as the code defines them; one the code no longer defines is left
    out."""
    listed = []
    for row in rows:
        if (assistant := assistants.get(row.assistant_id)) is not None:
            listed.append(
                ChatAssistantInfo(**info(assistant).model_dump(), is_default=row.is_default)
            )
    return ChatAssistantList(assistants=listed)


@router.get(
    "/api/assistants",
    response_model=AssistantList,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def list_assistants(_: CurrentUser, assistants: AssistantsDep) -> AssistantList:
    """Every assistant of the deployment, the default first."""
    return AssistantList(assistants=[info(a) for a in assistants])


@router.get(
    "/api/chats/{chat_id}/assistants",
    response_model=ChatAssistantList,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def chat_assistants(
    chat_id: UUID, user: CurrentUser, services: ServicesDep, assistants: AssistantsDep
) -> ChatAssistantList:
    """The chat's assistants, the earliest added first."""
    async with user_transaction(await services.pool(), user.claims) as conn:
        await require_chat(conn, ChatId(chat_id))
        rows = await chat_store.chat_assistants(conn, ChatId(chat_id), assistants.default.id)
    return chat_list(rows, assistants)


@router.post(
    "/api/chats/{chat_id}/assistants",
    response_model=ChatAssistantList,
    response_model_by_alias=True,
    responses={**ERROR_RESPONSES, **MEMBER_RESPONSES},
)
async def add_assistant(
    chat_id: UUID,
    body: AddAssistant,
    user: CurrentUser,
    services: ServicesDep,
    assistants: AssistantsDep,
) -> ChatAssistantList:
    """Add an assistant to the chat (with `default`, it answers what names no one); adding one
    that is there already only changes the default. 404 for an assistant the code does not
    define; 403 `not_chat_owner` for a member: a chat's assistants are its owner's choice."""
    assistant = assistants.pick(body.assistant_id)
    async with user_transaction(await services.pool(), user.claims) as conn:
        await require_owner(conn, ChatId(chat_id))
        rows = await chat_store.add_to_chat(
            conn,
            ChatId(chat_id),
            assistant.id,
            make_default=body.default,
            fallback=assistants.default.id,
        )
    return chat_list(rows, assistants)


@router.delete(
    "/api/chats/{chat_id}/assistants/{assistant_id}",
    response_model=ChatAssistantList,
    response_model_by_alias=True,
    responses={**ERROR_RESPONSES, **MEMBER_RESPONSES},
)
async def remove_assistant(
    chat_id: UUID,
    assistant_id: AssistantIdPath,
    user: CurrentUser,
    services: ServicesDep,
    assistants: AssistantsDep,
) -> ChatAssistantList:
    """Remove an assistant from the chat: its replies and thread stay; if it was the default,
    the earliest added of the others becomes it. 409 for the chat's only assistant or one that
    is not in the chat; 403 `not_chat_owner` for a member."""
    async with user_transaction(await services.pool(), user.claims) as conn:
        await require_owner(conn, ChatId(chat_id))
        rows = await chat_store.remove_from_chat(
            conn, ChatId(chat_id), assistant_id, fallback=assistants.default.id
        )
    return chat_list(rows, assistants)
