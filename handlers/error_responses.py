"""The error responses the OpenAPI document gives each route (the bodies of handlers/errors.py)."""

from __future__ import annotations

from typing import Any

# Documented so that clients generated from the OpenAPI schema parse errors as they are sent
# (FastAPI would otherwise document its own 422 body, which this app never returns). They name
# ErrorBody's schema, which handlers/app.py adds to the components: with `"model": ErrorBody`
# FastAPI would build a serializer for every error response of every route (175), for the
# schema alone, at every cold start.
ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
# What the owner-only routes add to ERROR_RESPONSES.
MEMBER_RESPONSES: dict[int | str, dict[str, Any]] = {
    403: {
        "content": ERROR_CONTENT,
        "description": "The caller is a member of the chat, and this is its owner's to do.",
    },
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"content": ERROR_CONTENT, "description": description}
    for status, description in {
        400: "The body cannot be decoded.",
        401: "Missing or invalid access token.",
        404: "No such chat among the caller's.",
        409: (
            "A background job is still running, the message was already sent, or it cannot be"
            " edited or answered again."
        ),
        413: "The message or the request body is too large.",
        422: "The request is not valid.",
        503: "The server is stopping (`server_stopping`): retry after Retry-After seconds.",
    }.items()
}
# Only the routes that start a turn or create a chat count against the per-user limits.
LIMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    429: {
        "content": ERROR_CONTENT,
        "description": (
            "A per-user limit is reached, and nothing was stored: `too_many_active_turns`"
            " (MAX_ACTIVE_TURNS_PER_USER turns not yet ended), `too_many_turns`"
            " (MAX_TURNS_PER_MINUTE turns started in the last 60 s), `too_many_chats`"
            " (MAX_CHATS_PER_MINUTE chats in the last 60 s) or `token_budget_spent`"
            " (MAX_USER_DAILY_TOKENS tokens used by the user's replies since midnight UTC)."
        ),
        "headers": {
            "Retry-After": {
                "description": (
                    "Seconds until asking again may pass: when the oldest turn or chat"
                    " counted leaves the 60 s window; for active turns, a polling interval;"
                    " for the daily token budget, until midnight UTC."
                ),
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    }
}
