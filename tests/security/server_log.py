"""What the server logs when something it did not expect goes wrong."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

# uvicorn logs "Exception in ASGI application" here, and its logger does not propagate to the
# root logger that everything else reaches.
LOGGERS = ("", "uvicorn.error")


class _Exceptions(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@contextmanager
def logged_exceptions() -> Iterator[list[logging.LogRecord]]:
    """Collects error records that carry an exception. Enter it once the stack is up: uvicorn
    reconfigures its loggers when it starts, dropping handlers added before."""
    handler = _Exceptions()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def describe(records: list[logging.LogRecord]) -> str:
    return "\n".join(
        f"{r.name}: {r.getMessage()} ({r.exc_info and r.exc_info[1]!r})" for r in records
    )
