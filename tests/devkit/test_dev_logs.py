"""`handoff dev` on a terminal logs a plain line per request; elsewhere JSON lines."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.dev_server import HANDOFF

READ_WITHIN_S = 60


def read_until(fd: int, pattern: str, seen: bytearray) -> re.Match[str]:
    """Read the terminal into `seen` until `pattern` matches what it printed."""
    deadline = time.monotonic() + READ_WITHIN_S
    while not (found := re.search(pattern, seen.decode(errors="replace"), re.MULTILINE)):
        left = deadline - time.monotonic()
        assert left > 0, f"{pattern!r} not printed:\n{seen.decode(errors='replace')}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other end closed: the process has exited
                chunk = b""
            assert chunk, f"exited before {pattern!r}:\n{seen.decode(errors='replace')}"
            seen += chunk
    return found


def test_on_a_terminal_each_request_is_a_plain_line(database_url: str, tmp_path: Path) -> None:
    terminal, its_end = pty.openpty()
    server = subprocess.Popen(  # noqa: S603 - the project's own command
        [HANDOFF, "dev", "--port", "0", "--data-dir", str(tmp_path)],
        env={**os.environ, "DATABASE_URL": database_url},
        stdin=subprocess.DEVNULL,
        stdout=its_end,
        stderr=its_end,
    )
    os.close(its_end)
    seen = bytearray()
    try:
        origin = read_until(terminal, r"Handoff is running at (http://\S+) ", seen).group(1)
        read_until(terminal, r"^Stop with Ctrl-C\.", seen)
        assert httpx.get(f"{origin}/api/dev/session").status_code == 200
        line = read_until(terminal, r"^\d\d:\d\d:\d\d GET /api/dev/session 200 \d+ ms\r?$", seen)
        server.send_signal(signal.SIGTERM)
        read_until(terminal, r"^handoff dev stopped\.", seen)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        os.close(terminal)
    assert "{" not in line.group(0)
    printed = seen.decode()
    assert '"level"' not in printed, printed
