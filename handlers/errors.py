"""Domain errors to HTTP: one table, JSON bodies, no internals."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from handlers.auth import InvalidToken
from infra.store.approvals import ApprovalAlreadyDecided, ApprovalNotFound
from infra.store.branches import EditTargetNotFound, NotEditable
from infra.store.chats import ChatNotFound, UnknownUser
from infra.store.jobs import JobAlreadyActive
from infra.store.messages import DuplicateMessage

logger = logging.getLogger(__name__)


# Not frozen: Starlette clears `__traceback__` on every exception it has handled, and a frozen
# dataclass turns that into a second, unhandled exception after the response went out.
@dataclass(eq=False)
class ApiError(Exception):
    """An error answer: HTTP status, a stable code for clients, a user-safe message."""

    status: int
    code: str
    message: str


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """The body of every error response, as the OpenAPI schema documents it."""

    error: ErrorDetail


ERRORS: dict[type[Exception], ApiError] = {
    InvalidToken: ApiError(401, "unauthorized", "Missing or invalid access token."),
    UnknownUser: ApiError(401, "unauthorized", "Missing or invalid access token."),
    # 404, not 403: whether another user's chat exists is not for this user to learn.
    ChatNotFound: ApiError(404, "chat_not_found", "Chat not found."),
    JobAlreadyActive: ApiError(
        409, "job_in_progress", "A previous answer is still being prepared in this chat."
    ),
    DuplicateMessage: ApiError(409, "duplicate_message", "This message was already sent."),
    ApprovalNotFound: ApiError(404, "approval_not_found", "No tool call is waiting for this."),
    EditTargetNotFound: ApiError(404, "message_not_found", "No such message of yours to edit."),
    NotEditable: ApiError(
        409, "message_not_editable", "This message was sent before edits were possible."
    ),
    ApprovalAlreadyDecided: ApiError(
        409, "approval_already_decided", "This tool call was already decided."
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


def error_response(error: ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(
        {"error": {"code": error.code, "message": error.message}},
        status_code=error.status,
        headers=headers,
    )


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def domain_error(_: Request, exc: Exception) -> JSONResponse:
        return error_response(ERRORS[type(exc)])

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # Field paths and reasons only: echoing the input could reflect a secret back.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
            for e in exc.errors()
        )
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
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)


# Documented so that clients generated from the OpenAPI schema parse errors as they are sent
# (FastAPI would otherwise document its own 422 body, which this app never returns).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in {
        400: "The body cannot be decoded.",
        401: "Missing or invalid access token.",
        404: "No such chat among the caller's.",
        409: "A background job is still running, or the message was already sent.",
        413: "The message or the request body is too large.",
        422: "The request is not valid.",
    }.items()
}
