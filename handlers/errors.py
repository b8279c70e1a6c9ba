"""Domain errors to HTTP: one table, JSON bodies, no internals."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent.assistants import UnknownAssistant
from handlers.auth import InvalidToken
from infra.db import PoolClosed
from infra.store.admission import DuplicateMessage
from infra.store.approvals import ApprovalAlreadyDecided, ApprovalNotFound
from infra.store.assistants import AssistantNotInChat, LastAssistant
from infra.store.branches import BranchNotFound
from infra.store.cascades import AlreadyDecided as CascadeAlreadyDecided
from infra.store.cascades import CascadeNotFound
from infra.store.chats import ChatNotFound, MessageNotFound, NotChatOwner, UnknownUser
from infra.store.forks import CheckpointNotFound, EditTargetNotFound, NotEditable
from infra.store.jobs import JobAlreadyActive
from infra.store.limits import (
    LimitReached,
    TokenBudgetSpent,
    TooManyActiveTurns,
    TooManyChats,
    TooManyTurns,
)
from infra.store.members import MemberNotAdded, MemberNotFound, OwnerStays, TooManyMembers
from infra.store.pauses import NothingToPause, NotPaused
from infra.store.prompts import NotTurnStarter
from infra.store.questions import QuestionAlreadyAnswered, QuestionNotPending

logger = logging.getLogger(__name__)


# Not frozen: Starlette clears `__traceback__` on every exception it has handled, and a frozen
# dataclass turns that into a second, unhandled exception after the response went out.
@dataclass(eq=False)
class ApiError(Exception):
    """An error answer: HTTP status, a stable code for clients, a user-safe message."""

    status: int
    code: str
    message: str
    # Seconds until asking again may pass: the Retry-After header of a 429.
    retry_after_s: int | None = None


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """The body of every error response, as the OpenAPI schema documents it."""

    error: ErrorDetail


# A request the server cut short as it stops (handlers/shutdown.py), or that found the pool
# closed for that reason.
SERVER_STOPPING = ApiError(
    503, "server_stopping", "The server is restarting. Please retry in a moment.", retry_after_s=2
)

ERRORS: dict[type[Exception], ApiError] = {
    InvalidToken: ApiError(401, "unauthorized", "Missing or invalid access token."),
    UnknownUser: ApiError(401, "unauthorized", "Missing or invalid access token."),
    # 404, not 403: whether another user's chat exists is not for this user to learn.
    ChatNotFound: ApiError(404, "chat_not_found", "Chat not found."),
    UnknownAssistant: ApiError(404, "assistant_not_found", "No such assistant."),
    # One answer for both: whether a user or another's chat exists is not the caller's to learn.
    MemberNotAdded: ApiError(
        404, "chat_or_user_not_found", "No such chat of yours, or no such user."
    ),
    MemberNotFound: ApiError(404, "member_not_found", "This user is not a member of the chat."),
    NotChatOwner: ApiError(403, "not_chat_owner", "Only the chat's owner can do this."),
    OwnerStays: ApiError(
        409, "owner_stays", "The owner cannot leave their chat; they may delete it instead."
    ),
    TooManyMembers: ApiError(
        422, "too_many_members", "This chat has as many members as it may have."
    ),
    AssistantNotInChat: ApiError(
        409,
        "assistant_not_in_chat",
        "This assistant is not in this chat, so there is nothing to remove.",
    ),
    LastAssistant: ApiError(
        409,
        "last_assistant",
        "A chat keeps at least one assistant: add another before removing this one.",
    ),
    JobAlreadyActive: ApiError(
        409, "job_in_progress", "A previous answer is still being prepared in this chat."
    ),
    DuplicateMessage: ApiError(409, "duplicate_message", "This message was already sent."),
    ApprovalNotFound: ApiError(404, "approval_not_found", "No tool call is waiting for this."),
    # In a shared chat, everyone sees the prompt; it is answered by whoever started the turn.
    NotTurnStarter: ApiError(
        403,
        "not_turn_starter",
        "Only the person whose message started this can answer it.",
    ),
    EditTargetNotFound: ApiError(404, "message_not_found", "No such message of yours to edit."),
    MessageNotFound: ApiError(404, "message_not_found", "No such message in this chat."),
    BranchNotFound: ApiError(404, "branch_not_found", "No such branch in this chat."),
    NotEditable: ApiError(
        409, "message_not_editable", "This message was sent before edits were possible."
    ),
    # The message's metadata names a checkpoint its thread does not have (users may write their
    # messages' metadata): the fork has nothing to start from.
    CheckpointNotFound: ApiError(
        409,
        "checkpoint_not_found",
        "Where this message stands in the conversation cannot be found, so it cannot be edited"
        " or answered again.",
    ),
    ApprovalAlreadyDecided: ApiError(
        409, "approval_already_decided", "This tool call was already decided."
    ),
    NothingToPause: ApiError(409, "nothing_running", "No answer is being prepared in this chat."),
    NotPaused: ApiError(409, "not_paused", "No answer is paused in this chat."),
    QuestionNotPending: ApiError(
        409, "question_not_pending", "No question is waiting for an answer under this id."
    ),
    QuestionAlreadyAnswered: ApiError(
        409, "question_already_answered", "This question was already answered."
    ),
    CascadeNotFound: ApiError(
        404, "cascade_not_found", "No cascade of this chat waits for this under that id."
    ),
    CascadeAlreadyDecided: ApiError(
        409, "cascade_already_decided", "This cascade was already decided."
    ),
    PoolClosed: SERVER_STOPPING,
}
# The per-user limits (infra/store/limits.py): 429 with a Retry-After.
LIMITS: dict[type[LimitReached], tuple[str, str]] = {
    TooManyActiveTurns: (
        "too_many_active_turns",
        "Too many of your answers are still in progress. Wait for one to finish, or cancel one.",
    ),
    TooManyTurns: (
        "too_many_turns",
        "You sent too many messages in the last minute. Try again in {seconds} seconds.",
    ),
    TooManyChats: (
        "too_many_chats",
        "You created too many chats in the last minute. Try again in {seconds} seconds.",
    ),
    TokenBudgetSpent: (
        "token_budget_spent",
        "You have used today's token budget. It renews at midnight UTC, in {wait}.",
    ),
}
HTTP_CODES = {
    # FastAPI's answer to a body it cannot even decode (bytes that are not UTF-8).
    400: "invalid_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def limit_error(exc: LimitReached) -> ApiError:
    code, message = LIMITS[type(exc)]
    seconds = exc.retry_after_s
    text = message.format(seconds=seconds, wait=wait_words(seconds))
    return ApiError(429, code, text, retry_after_s=seconds)


def wait_words(seconds: int) -> str:
    """A wait as a person says it: "less than a minute", "1 minute", "3 hours and 5 minutes"."""
    if seconds < 60:
        return "less than a minute"
    hours, minutes = divmod(math.ceil(seconds / 60), 60)
    parts = [
        f"{n} {unit}{'' if n == 1 else 's'}"
        for n, unit in ((hours, "hour"), (minutes, "minute"))
        if n
    ]
    return " and ".join(parts)


def error_response(error: ApiError) -> JSONResponse:
    headers: dict[str, str] = {}
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if error.retry_after_s is not None:
        headers["Retry-After"] = str(error.retry_after_s)
    body = {"error": {"code": error.code, "message": error.message}}
    return JSONResponse(body, status_code=error.status, headers=headers or None)


def _problem(error: dict[str, Any]) -> str:
    """One validation error as `<field>: <reason>`; a body that is not JSON says where it broke
    (its location is a character offset, not a field)."""
    if error["type"] == "json_invalid":
        reason = error.get("ctx", {}).get("error", "malformed")
        return f"body: not valid JSON ({reason} at character {error['loc'][-1]})"
    return f"{'.'.join(str(p) for p in error['loc'] if p != 'body') or 'body'}: {error['msg']}"


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def domain_error(_: Request, exc: Exception) -> JSONResponse:
        error = ERRORS[type(exc)]
        if isinstance(exc, UnknownAssistant):  # its id, a slug (the fields and the table check)
            error = replace(error, message=f"No such assistant: {exc.assistant_id}.")
        return error_response(error)

    async def limit_reached(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, LimitReached)
        return error_response(limit_error(exc))

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # Field paths and reasons only: echoing the input could reflect a secret back.
        problems = "; ".join(_problem(e) for e in exc.errors())
        return error_response(ApiError(422, "invalid_request", problems or "Invalid request."))

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = HTTP_CODES.get(exc.status_code, "http_error")
        return error_response(ApiError(exc.status_code, code, str(exc.detail)))

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error", exc_info=exc)
        return error_response(ApiError(500, "internal", "Something went wrong. Please retry."))

    app.add_exception_handler(ApiError, api_error)
    for exc_type in ERRORS:
        app.add_exception_handler(exc_type, domain_error)
    app.add_exception_handler(LimitReached, limit_reached)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
