"""`handoff dev` as a person starts it: the real command in a child process."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

READY = re.compile(r"Handoff is running at (http://\S+) ")
READY_WITHIN_S = 60
# The console script the project installs, beside this interpreter.
HANDOFF = str(Path(sys.executable).parent / "handoff")


@asynccontextmanager
async def handoff_dev(database_url: str, **env: str) -> AsyncIterator[str]:
    """Run `handoff dev --port 0` on `database_url`; its origin, once it serves."""
    async with handoff_dev_process(database_url, **env) as (origin, _):
        yield origin


@asynccontextmanager
async def handoff_dev_process(
    database_url: str, **env: str
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """`handoff_dev`, with the child process (to signal it)."""
    child = await asyncio.create_subprocess_exec(
        HANDOFF,
        "dev",
        "--port",
        "0",
        env={**os.environ, "DATABASE_URL": database_url, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert child.stdout is not None
    printed: list[str] = []
    drain: asyncio.Task[bytes] | None = None
    try:
        async with asyncio.timeout(READY_WITHIN_S):
            while not (found := READY.search(printed[-1] if printed else "")):
                line = await child.stdout.readline()
                if not line:
                    raise AssertionError("handoff dev exited:\n" + "".join(printed))
                printed.append(line.decode())
        # Keep reading, so a chatty server never blocks on a full pipe.
        drain = asyncio.create_task(child.stdout.read())
        yield found.group(1), child
    finally:
        with suppress(ProcessLookupError):
            child.terminate()
        await child.wait()
        if drain is not None:
            drain.cancel()
