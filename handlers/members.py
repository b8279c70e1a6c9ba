"""Who is in a chat: list its owner and members, add a member, remove one (or leave).

Members read and send like the owner; membership and deleting the chat are the owner's
(infra/store/members.py). Adding to a chat that is not the caller's and adding a user who does
not exist get the same 404, so neither tells whether the other exists.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from fastapi import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from handlers.deps import CurrentUser, ServicesDep, strict_router
from handlers.error_responses import ERROR_RESPONSES, MEMBER_RESPONSES
from handlers.fields import NO_NUL
from infra.store import members
from infra.store.ids import ChatId

router = strict_router()


class Member(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    user_id: UUID
    email: str | None
    role: Literal["owner", "member"]
    added_at: datetime = Field(description="When they joined; for the owner, the chat's creation.")


class MemberList(BaseModel):
    members: list[Member] = Field(description="The owner first, then members as they joined.")


class NewMember(BaseModel):
    """Exactly one of `userId` and `email`: an existing user."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    user_id: UUID | None = None
    email: Annotated[str, Field(min_length=3, max_length=320), NO_NUL] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> NewMember:
        if (self.user_id is None) == (self.email is None):
            raise ValueError("give exactly one of userId and email")
        return self


def member_of(row: members.MemberRow) -> Member:
    return Member(user_id=row.user_id, email=row.email, role=row.role, added_at=row.added_at)


@router.get(
    "/api/chats/{chat_id}/members",
    response_model=MemberList,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def list_members(chat_id: UUID, user: CurrentUser, services: ServicesDep) -> MemberList:
    """The chat's owner and members, for anyone in the chat."""
    rows = await members.list_members(await services.pool(), user.claims, ChatId(chat_id))
    return MemberList(members=[member_of(r) for r in rows])


@router.post(
    "/api/chats/{chat_id}/members",
    status_code=201,
    response_model=Member,
    response_model_by_alias=True,
    responses={**ERROR_RESPONSES, **MEMBER_RESPONSES},
)
async def add_member(
    chat_id: UUID, body: NewMember, user: CurrentUser, services: ServicesDep, response: Response
) -> Member:
    """Add an existing user, by id or e-mail, to the caller's chat: 201 with the member; 200
    when they are in it already (the owner too). 404 `chat_or_user_not_found` for a chat that
    is not the caller's and for a user who does not exist alike; 422 `too_many_members` past
    MAX_MEMBERS_PER_CHAT."""
    row, added = await members.add_member(
        await services.pool(),
        user.claims,
        ChatId(chat_id),
        user_id=body.user_id,
        email=body.email,
        max_members=services.settings.max_members_per_chat,
    )
    if not added:
        response.status_code = 200
    return member_of(row)


@router.delete(
    "/api/chats/{chat_id}/members/{user_id}",
    status_code=204,
    response_class=Response,
    responses={**ERROR_RESPONSES, **MEMBER_RESPONSES},
)
async def remove_member(
    chat_id: UUID, user_id: UUID, user: CurrentUser, services: ServicesDep
) -> None:
    """Remove a member: the owner removes anyone, a member removes themself (leaves). Their
    reads of the chat stop at once. 403 `not_chat_owner` for a member removing someone else,
    409 `owner_stays` for the owner, 404 `member_not_found` for a user who is not a member."""
    await members.remove_member(await services.pool(), user.claims, ChatId(chat_id), user_id)
