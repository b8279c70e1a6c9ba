"""`handoff dev` as a person starts it: the real command in a child process."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

READY = re.compile(r"Handoff is running at (http://\S+) ")
READY_WITHIN_S = 60
STOP_WITHIN_S = 30
# The console script the project installs, beside this interpreter.
HANDOFF = str(Path(sys.executable).parent / "handoff")


@dataclass
class DevServer:
    """A running `handoff dev`: its origin, and everything it printed (still growing)."""

    child: asyncio.subprocess.Process
    origin: str
    lines: list[str]
    _drain: asyncio.Task[None] = field(repr=False)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    @property
    def token(self) -> str:
        """The token the banner prints for curl."""
        found = re.search(r"^TOKEN=(\S+)$", self.output, re.MULTILINE)
        assert found, self.output
        return found.group(1).strip("'")

    async def stop(self, signum: signal.Signals = signal.SIGTERM) -> int:
        """Send `signum` and wait for the process and its output to end; its exit code."""
        with suppress(ProcessLookupError):
            self.child.send_signal(signum)
        async with asyncio.timeout(STOP_WITHIN_S):
            code = await self.child.wait()
            await self._drain
        return code

    async def kill(self) -> None:
        if self.child.returncode is None:
            with suppress(ProcessLookupError):
                self.child.kill()
            await self.child.wait()
        self._drain.cancel()
        with suppress(asyncio.CancelledError):
            await self._drain


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def start_handoff_dev(
    database_url: str | None, data_dir: Path, *args: str, **env: str
) -> DevServer:
    """Start `handoff dev --data-dir data_dir` (`--port 0` unless `args` name one) on
    `database_url`, or on an embedded Postgres when it is None; returns once it serves. The
    caller stops it."""
    environment = {**os.environ, **env}
    environment.pop("DATABASE_URL", None)
    if database_url is not None:
        environment["DATABASE_URL"] = database_url
    port = [] if "--port" in args else ["--port", "0"]
    child = await asyncio.create_subprocess_exec(
        HANDOFF,
        "dev",
        "--data-dir",
        str(data_dir),
        *port,
        *args,
        env=environment,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert child.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(READY_WITHIN_S):
            while not (found := READY.search(lines[-1] if lines else "")):
                line = await child.stdout.readline()
                if not line:
                    raise AssertionError("handoff dev exited:\n" + "".join(lines))
                lines.append(line.decode())
            # The rest of the banner (the token comes after the first line).
            while not lines[-1].startswith("Stop with Ctrl-C"):
                line = await child.stdout.readline()
                if not line:
                    raise AssertionError("handoff dev exited:\n" + "".join(lines))
                lines.append(line.decode())
    except BaseException:
        with suppress(ProcessLookupError):
            child.kill()
        await child.wait()
        raise

    async def drain(stdout: asyncio.StreamReader) -> None:
        # Keep reading, so a chatty server never blocks on a full pipe.
        while line := await stdout.readline():
            lines.append(line.decode())

    return DevServer(child, found.group(1), lines, asyncio.create_task(drain(child.stdout)))


@asynccontextmanager
async def dev_servers() -> AsyncIterator[list[DevServer]]:
    """A list to add started servers to: any still running at the end is killed."""
    started: list[DevServer] = []
    try:
        yield started
    finally:
        for server in started:
            await server.kill()


@asynccontextmanager
async def handoff_dev(database_url: str, *args: str, **env: str) -> AsyncIterator[str]:
    """Run `handoff dev --port 0` on `database_url`; its origin, once it serves."""
    with tempfile.TemporaryDirectory(prefix="handoff-dev-test-") as data_dir:
        async with dev_servers() as started:
            server = await start_handoff_dev(database_url, Path(data_dir), *args, **env)
            started.append(server)
            yield server.origin
            await server.stop()
