"""GET /api/chat/{chatId}/history: a chat's messages, each assistant's along its active branch,
or one assistant's thread along its active branch, another, or all."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import Query
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from handlers.deps import AssistantsDep, CurrentUser, ServicesDep, strict_router
from handlers.error_responses import ERROR_RESPONSES
from handlers.errors import ApiError
from handlers.fields import NO_NUL, AssistantQuery
from infra.store import branches, cascades
from infra.store import history as history_store
from infra.store.ids import ChatId

router = strict_router()


class Draft(BaseModel):
    content: str
    seq: int


class HistoryMessage(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: UUID
    # A reply's assistant; a user message's, the one it was addressed to first (null: posted
    # to a shared chat only, answered by nobody).
    assistant_id: str | None
    role: str
    # Who sent a user message: the chat's owner or a member (null for a reply).
    sender_id: UUID | None = None
    content: str
    status: str
    created_at: datetime
    parent_message_id: UUID | None
    checkpoint_id: str | None  # user message: where its turn began; reply: where it ended
    branch_id: str
    stale: bool  # off the active branch
    edit_of: UUID | None
    # The tool call the job waits for the user to approve (status awaiting_approval); show its
    # `display`, the arguments with every hidden character escaped, not its raw `args`.
    pending_approval: dict[str, Any] | None = None
    # The question the model asked the user (status awaiting_input): questionId, question,
    # options, context, expiresAt.
    pending_question: dict[str, Any] | None = None
    # The turn's tool calls and how they went (`render_agent_snapshot`'s progress).
    progress: list[dict[str, Any]] = []
    # A reply still running in the background: its latest draft, as the change feed sends it.
    draft: Draft | None = None
    # A reply's token usage so far (`agent.usage.TurnUsage`: each model call, and their sum).
    usage: dict[str, Any] | None = None
    # What replaced this message (an edit's message, a regenerated reply), if anything did.
    replaced_by: UUID | None = None
    # A reply an edit's cascade left as it was: `declined` (the editor declined to go on).
    cascade: str | None = None


class PendingCascade(BaseModel):
    """A cascade's card: `remaining` replies still depend on the edit of `editedMessageId`
    (by `replacementId`); answer it with POST /api/chat/{chatId}/cascades/{id}/decision."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: UUID
    edited_message_id: UUID
    replacement_id: UUID
    regenerated: int
    remaining: int


class History(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    messages: list[HistoryMessage]
    # The branch shown; with `all`, the active one. Without `assistantId`, the chat's default
    # assistant's (each message carries its own).
    branch_id: str
    # The chat's cascades waiting for the editor's decision, oldest first.
    pending_cascades: list[PendingCascade] = []


def history_message(row: history_store.HistoryRow) -> HistoryMessage:
    metadata = row.metadata
    return HistoryMessage(
        id=row.id,
        assistant_id=row.assistant_id or None,
        role=row.role,
        sender_id=row.sender_id,
        content=row.content,
        status=row.status,
        created_at=row.created_at,
        parent_message_id=row.parent_message_id,
        checkpoint_id=metadata.get("checkpointId"),
        branch_id=metadata.get("branchId", branches.MAIN_BRANCH),
        stale=bool(metadata.get("stale", False)),
        edit_of=metadata.get("editOf"),
        pending_approval=metadata.get("pendingApproval"),
        pending_question=metadata.get("pendingQuestion"),
        progress=metadata.get("snapshot", {}).get("progress", []),
        usage=metadata.get("usage"),
        replaced_by=metadata.get("replacedBy"),
        cascade=metadata.get("cascade"),
        draft=(
            Draft(content=row.draft_content, seq=row.draft_seq)
            if row.draft_content is not None and row.draft_seq is not None
            else None
        ),
    )


@router.get(
    "/api/chat/{chat_id}/history",
    response_model=History,
    response_model_by_alias=True,
    responses=ERROR_RESPONSES,
)
async def history(
    chat_id: UUID,
    user: CurrentUser,
    services: ServicesDep,
    assistants: AssistantsDep,
    assistant_id: AssistantQuery = None,
    branch_id: Annotated[
        str | None, Query(alias="branchId", min_length=1, max_length=64), NO_NUL
    ] = None,
    every_branch: Annotated[bool, Query(alias="all")] = False,
) -> History:
    """Without `assistantId`, the whole chat: each of its assistants' messages along that
    assistant's active branch, in chat order (`all=true`: every message; `branchId`: the
    default assistant's branch). With it, that assistant's thread from the root to the head of
    its active branch (or `branchId`'s), oldest first; with `all=true`, every branch's. Those
    off their active branch are `stale`. Under RLS.
    """
    if every_branch and branch_id is not None:
        raise ApiError(422, "invalid_request", "branchId: not with all")
    shown, rows = await history_store.history(
        await services.pool(),
        user.claims,
        chat_id=ChatId(chat_id),
        assistant_id=None if assistant_id is None else assistants.pick(assistant_id).id,
        fallback=assistants.default.id,
        branch=branch_id,
        every_branch=every_branch,
    )
    cards = await cascades.pending_of(await services.pool(), user.claims, ChatId(chat_id))
    return History(
        messages=[history_message(row) for row in rows],
        branch_id=shown,
        pending_cascades=[
            PendingCascade(
                id=c.id,
                edited_message_id=c.edited_message_id,
                replacement_id=c.replacement_id,
                regenerated=c.regenerated,
                remaining=c.remaining,
            )
            for c in cards
        ],
    )
