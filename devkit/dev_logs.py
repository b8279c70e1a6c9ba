"""`handoff dev`'s logs: a line per request, and plain text instead of JSON on a terminal."""

from __future__ import annotations

import asyncio
import logging
import sys
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("devkit.requests")
PATH_CHARS = 120
# Attributes every LogRecord has; anything else came in through `extra` (as in infra/logs.py).
STANDARD_ATTRIBUTES = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class RequestLog:
    """Logs each HTTP request once it has been answered (a stream once it ends): method, path,
    status and duration. Once `stopping` is set, a request that fails was cut short by it."""

    def __init__(self, app: ASGIApp, stopping: asyncio.Event | None = None) -> None:
        self.app = app
        self.stopping = stopping or asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        cancelled = False
        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            self._log(scope, status, time.perf_counter() - started, cancelled)

    def _log(self, scope: Scope, status: int | None, seconds: float, cancelled: bool) -> None:
        query = scope["query_string"].decode()
        path = scope["path"] + (f"?{query}" if query else "")
        if len(path) > PATH_CHARS:
            path = path[: PATH_CHARS - 1] + "…"
        ms = round(seconds * 1000)
        # No status: the app failed before answering, and the server answers 500.
        shown = status or 500
        cut_short = self.stopping.is_set() and (cancelled or shown >= 500)
        outcome = " (cut short: the server stopped)" if cut_short else ""
        logger.info(
            f"{scope['method']} {path} {shown} {_duration(ms)}{outcome}",
            extra={"method": scope["method"], "path": path, "status": shown, "duration_ms": ms},
        )


def _duration(ms: int) -> str:
    return f"{ms} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


class StopIsNoError(logging.Filter):
    """uvicorn's words for the requests it cancels when the server stops (a tool step still
    running, say): the request log says it once, without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "timeout graceful shutdown exceeded" in record.getMessage():
            return False
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError)


class TerminalFormatter(logging.Formatter):
    """`12:00:01 POST /api/chat/respond 200 35 ms`; other records with their level, logger
    and extra fields: the JSON lines say the same, for machines."""

    def format(self, record: logging.LogRecord) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(record.created))
        message = record.getMessage()
        if record.name == logger.name:
            return f"{clock} {message}"
        extra = {k: v for k, v in record.__dict__.items() if k not in STANDARD_ATTRIBUTES}
        details = " ".join(f"{k}={v}" for k, v in extra.items())
        line = f"{clock} {record.levelname.lower()} {record.name}: {message}"
        line += f" ({details})" if details else ""
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def quiet_stop() -> None:
    logging.getLogger("uvicorn.error").addFilter(StopIsNoError())


def log_for_terminal() -> None:
    """Plain text on stderr when it is a terminal (configure_logging has made JSON lines)."""
    if not sys.stderr.isatty():
        return
    for handler in logging.getLogger().handlers:
        handler.setFormatter(TerminalFormatter())
