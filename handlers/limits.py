"""Refuse requests at the edge: oversized bodies, stale Inngest signatures."""

from __future__ import annotations

import time
import urllib.parse

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOO_LARGE = "The request body is too large."


class BodySizeLimit:
    """413 for bodies over `max_bytes`: by Content-Length up front, or by counting as they
    arrive (chunked uploads); the app's error handlers render the JSON body."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
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


SIGNATURE_MAX_AGE_S = 300


class FreshInngestSignature:
    """401 for a call to the Inngest endpoint signed more than five minutes away from now.

    inngest-py 0.5 checks the signature's HMAC but not its timestamp, so a captured call could be
    replayed for ever. Inngest signs every attempt afresh, so honest calls are always fresh. A
    call without a signature passes through: the SDK refuses it itself (in production mode).
    """

    def __init__(self, app: ASGIApp, path: str, enabled: bool) -> None:
        self.app = app
        self.path = path
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.enabled and scope["type"] == "http" and scope["path"] == self.path:
            signature = dict(scope["headers"]).get(b"x-inngest-signature")
            if signature is not None and not _signed_recently(signature.decode("latin-1")):
                # The body the SDK gives every unauthorized call.
                response = JSONResponse({"message": "Unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _signed_recently(signature: str) -> bool:
    signed_at = urllib.parse.parse_qs(signature).get("t", [""])[0]
    return signed_at.isdigit() and abs(time.time() - int(signed_at)) <= SIGNATURE_MAX_AGE_S
