"""GET /api/dev/chat/{chatId}/changes: Realtime's `postgres_changes` for development, over SSE.

A fallback for clients without a websocket (`curl -N`): the chat page and `handoff chat` follow
changes through the dev server's Realtime endpoint (devkit/realtime/), with supabase-js and
supabase-py. Both are fed by logical decoding of the same publication (devkit/change_feed.py).

Wire format, events in order:

    event: subscribed          data: {"chatId": ...}   from here on, no change is missed
    event: postgres_changes    data: a supabase-js RealtimePostgresChangesPayload, per change
    : keepalive                a comment, every 15 s without changes
    event: error               data: {"code", "message"} when the feed dropped the stream; last
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from devkit.change_feed import (
    ChangeFeed,
    ChangeFeedClosed,
    ChangeFeedError,
    ChangeFeedLost,
    ChangeFeedUnavailable,
    SubscriberOverflow,
    Subscription,
)
from handlers.deps import CurrentUser, ServicesDep
from handlers.error_responses import ERROR_RESPONSES
from handlers.errors import ApiError, ErrorBody
from handlers.sse import SSE_HEADERS, sse
from infra.runtime import Services
from infra.store.ids import ChatId

logger = logging.getLogger(__name__)

router = APIRouter()
KEEPALIVE_S = 15.0
KEEPALIVE = b": keepalive\n\n"
STREAM_ERRORS: dict[type[ChangeFeedError], str] = {
    SubscriberOverflow: "change_feed_overflow",
    ChangeFeedLost: "change_feed_lost",
    ChangeFeedClosed: "change_feed_closed",
}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}},
    401: ERROR_RESPONSES[401],
    404: ERROR_RESPONSES[404],
    503: {"model": ErrorBody, "description": "The database cannot decode its WAL logically."},
}


async def change_feed(app: FastAPI, services: Services) -> ChangeFeed:
    """The app's feed, made on first use (only `handoff dev` serves this route)."""
    if getattr(app.state, "change_feed_closed", False):
        raise ApiError(503, "change_feed_closed", "The server is shutting down.")
    pool = await services.pool()
    feed: ChangeFeed | None = getattr(app.state, "change_feed", None)
    if feed is None:
        assert services.settings.database_url  # the pool opened with it
        feed = ChangeFeed(services.settings.database_url, pool)
        app.state.change_feed = feed
        # Released before the pool closes, so the replication slot goes with the server.
        app.state.on_shutdown.append(feed.close)
    return feed


async def close_change_feed(app: FastAPI) -> None:
    """End every stream of the feed now, and take no new subscriber: the server is stopping,
    and its streams would otherwise hold it up for its whole grace period."""
    app.state.change_feed_closed = True
    feed: ChangeFeed | None = getattr(app.state, "change_feed", None)
    if feed is not None:
        await feed.close()


@router.get(
    "/api/dev/chat/{chat_id}/changes", response_class=StreamingResponse, responses=RESPONSES
)
async def changes(
    chat_id: UUID, user: CurrentUser, services: ServicesDep, request: Request
) -> StreamingResponse:
    """Inserts and updates of the chat's `message` and `message_draft` rows that the caller
    may see, as Supabase Realtime would send them (deletes are not sent)."""
    feed = await change_feed(request.app, services)
    try:
        subscription = await feed.subscribe(user.claims, ChatId(chat_id))
    except ChangeFeedUnavailable as error:
        # The message says how to fix the database; it is a development server's operator who
        # reads it.
        raise ApiError(503, "change_feed_unavailable", str(error)) from error
    return ChangeStream(subscription)


async def change_events(subscription: Subscription) -> AsyncIterator[bytes]:
    yield sse("subscribed", {"chatId": str(subscription.chat_id)})
    while True:
        try:
            batch = await subscription.next(max_wait_s=KEEPALIVE_S)
        except ChangeFeedError as error:
            code = STREAM_ERRORS.get(type(error), "change_feed_lost")
            yield sse("error", {"code": code, "message": str(error)})
            return
        except Exception:
            logger.exception("change stream failed", extra={"chat_id": str(subscription.chat_id)})
            yield sse("error", {"code": "change_feed_lost", "message": "Please reload the chat."})
            return
        if not batch:
            yield KEEPALIVE
        for change in batch:
            yield sse("postgres_changes", {**change})


class ChangeStream(StreamingResponse):
    """A subscription's events; it leaves the feed however the response ends, the client
    hanging up included."""

    def __init__(self, subscription: Subscription) -> None:
        super().__init__(
            change_events(subscription), media_type="text/event-stream", headers=SSE_HEADERS
        )
        self.subscription = subscription

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.subscription.close()
