"""Refuse oversized request bodies at the edge."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOO_LARGE = "The request body is too large."


class BodySizeLimit:
    """413 for bodies over `max_bytes`: by Content-Length up front, or by counting as they
    arrive (chunked uploads); the app's error handlers render the JSON body."""

    def __init__(self, app: ASGIApp, max_bytes: int, exempt: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.exempt = exempt  # paths with limits of their own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"")
        declared_too_large = length.isdigit() and int(length) > self.max_bytes
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            if declared_too_large:
                raise HTTPException(413, TOO_LARGE)
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, TOO_LARGE)
            return message

        await self.app(scope, limited_receive, send)
