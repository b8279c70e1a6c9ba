"""The caller's chats: list, create and delete them, and delete one message of a chat."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from fastapi import Query, Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent.assistants import Assistants
from handlers.deps import AssistantsDep, CurrentUser, ServicesDep, strict_router
from handlers.error_responses import ERROR_RESPONSES, LIMIT_RESPONSES
from handlers.fields import NO_NUL, AssistantIdField
from infra.store import assistants as chat_assistants
from infra.store import chats, limits
from infra.store.ids import ChatId

router = strict_router()

# More than a chat could use, few enough that a request stays small.
MAX_CHAT_ASSISTANTS = 32


class Chat(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: UUID
    title: str
    created_at: datetime
    updated_at: datetime
    role: Literal["owner", "member"] = Field(
        description="The caller's: the chat's owner, or a member (docs/api.md, Shared chats)."
    )


class ChatList(BaseModel):
    chats: list[Chat]


class NewChat(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    title: Annotated[str, Field(max_length=200), NO_NUL] = ""
    # The chat's assistants, and the one that answers what names none (without either, the
    # deployment's default alone; with only the list, its first).
    assistant_ids: Annotated[list[AssistantIdField], Field(max_length=MAX_CHAT_ASSISTANTS)] = []
    default_assistant_id: AssistantIdField | None = None

    def chosen(self, assistants: Assistants) -> tuple[list[str], str] | None:
        """The ids and the default this chat starts with (UnknownAssistant for an id the code
        does not define); None when the request chose none."""
        if not self.assistant_ids and self.default_assistant_id is None:
            return None
        ids = [assistants.pick(i).id for i in self.assistant_ids]
        default = assistants.pick(self.default_assistant_id or ids[0]).id
        return ids, default


def chat_of(row: chats.ChatRow) -> Chat:
    role: Literal["owner", "member"] = "owner" if row.role == "owner" else "member"
    return Chat(
        id=row.id,
        title=row.title,
        created_at=row.created_at,
        updated_at=row.updated_at,
        role=role,
    )


@router.get(
    "/api/chats", response_model=ChatList, response_model_by_alias=True, responses=ERROR_RESPONSES
)
async def list_chats(
    user: CurrentUser,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> ChatList:
    """The chats the caller owns or is a member of, newest first, each with their `role`."""
    rows = await chats.list_chats(await services.pool(), user.claims, limit=limit)
    return ChatList(chats=[chat_of(row) for row in rows])


@router.post(
    "/api/chats",
    status_code=201,
    response_model=Chat,
    response_model_by_alias=True,
    responses={**ERROR_RESPONSES, **LIMIT_RESPONSES},
)
async def create_chat(
    user: CurrentUser,
    services: ServicesDep,
    assistants: AssistantsDep,
    body: NewChat | None = None,
) -> Chat:
    """A new chat of the caller's, with the assistants it names; 429 past MAX_CHATS_PER_MINUTE
    chats in the last minute, 404 for an assistant the deployment does not define."""
    request = body or NewChat()
    chosen = request.chosen(assistants)
    per_minute = services.settings.max_chats_per_minute
    async with (await services.pool()).connection() as conn, conn.transaction():
        await limits.admit(conn, user.id, "chats", limit=per_minute)
        row = await chats.create_chat(conn, user.claims, title=request.title)
        assert row is not None  # a new id never conflicts
        if chosen is not None:
            await chat_assistants.set_chat_assistants(conn, row.id, *chosen)
    return chat_of(row)


@router.delete(
    "/api/chats/{chat_id}", status_code=204, response_class=Response, responses=ERROR_RESPONSES
)
async def delete_chat(chat_id: UUID, user: CurrentUser, services: ServicesDep) -> None:
    """Delete the caller's chat: every copy of what it held is erased (its threads, tool
    results and their stored outputs, drafts), and a turn still running in it stops. The
    owner's alone: a member gets 403 `not_chat_owner`."""
    await chats.delete_chat(await services.pool(), user.claims, ChatId(chat_id))


@router.delete(
    "/api/chat/{chat_id}/messages/{message_id}",
    status_code=204,
    response_class=Response,
    responses=ERROR_RESPONSES,
)
async def delete_message(
    chat_id: UUID, message_id: UUID, user: CurrentUser, services: ServicesDep
) -> None:
    """Delete one message of a chat the caller is in: their own, or any when they own the chat.
    Its text is erased everywhere, and its assistant's thread is cut at it
    (docs/reliability.md)."""
    await chats.delete_message(await services.pool(), user.claims, ChatId(chat_id), message_id)
