"""Stopping the process: what the requests it cuts short receive, and how long turns still
storing their reply may hold it up.

The server first stops taking connections and gives the requests in flight its grace period
(`--timeout-graceful-shutdown` in run.sh; 2 s under `handoff dev`), then cancels those still
running and runs the app's shutdown. A cancelled request that has not answered would get the
server's plain-text 500: `AnswerWhileStopping` answers it in JSON instead, 503
`server_stopping`, and ends a stream that had begun with an `error` event of that code. Then
`settle_turns` waits for the turns still storing their reply, but only while the database
answers: once it does not, they could only wait for the pool's timeout, so the pool closes and
they end at once (their replies are ended as interrupted by whatever next finds their slot
silent, as for any process that stopped mid-turn).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from handlers.errors import SERVER_STOPPING, error_response
from handlers.sse import sse
from infra.runtime import Services

logger = logging.getLogger(__name__)

# How long the turns still storing their reply may hold the process up, at most.
TURNS_GRACE_S = 30.0
# How often the database is asked whether it answers, while turns are still storing.
PROBE_EVERY_S = 1.0
# A stream cut short: its turn may still be stored (or end interrupted), so not "retry", which
# would send the message twice.
STREAM_CUT = "The server stopped while sending this answer. Reload the chat to see where it got to."


class AnswerWhileStopping:
    """A request the server cancels as it stops is answered in JSON, not in plain text."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started: Message | None = None
        ended = False

        async def sending(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = message
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            # Only the request's own cancellation (not a task it awaited), and only while
            # something can still be said.
            if task is None or not task.cancelling() or ended:
                raise
            if started is None:
                task.uncancel()
                await error_response(SERVER_STOPPING)(scope, receive, send)
            elif _is_event_stream(started):
                task.uncancel()
                error = {"code": SERVER_STOPPING.code, "message": STREAM_CUT}
                await send({"type": "http.response.body", "body": sse("error", error)})
            else:
                raise


def _is_event_stream(start: Message) -> bool:
    headers: dict[bytes, bytes] = dict(start.get("headers", []))
    return headers.get(b"content-type", b"").startswith(b"text/event-stream")


async def settle_turns(
    turns: set[asyncio.Task[Any]], services: Services, *, grace_s: float = TURNS_GRACE_S
) -> None:
    """Wait for `turns` to end, for at most `grace_s`, and no longer than the database answers.
    Once it does not, the pool closes: turns waiting for a connection get PoolClosed now, not
    at the pool's timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    pending = set(turns)
    while pending and (left := deadline - loop.time()) > 0:
        _, pending = await asyncio.wait(pending, timeout=min(PROBE_EVERY_S, left))
        if pending and not await services.database_answers():
            logger.warning(
                "stopping while the database does not answer: turns not stored",
                extra={"turns": len(pending)},
            )
            await services.close()
            await asyncio.wait(pending, timeout=PROBE_EVERY_S)
            return
