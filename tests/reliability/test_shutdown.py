"""A server stopped (SIGTERM) while its database is down: the respond Lambda's server as run.sh
starts it, and `handoff dev`, each a real process on a Postgres of this module's own.

Requests waiting for a connection then used to get the server's plain-text 500, and the stop
waited for the pool's timeout (30 s). Every answer must be our JSON, and the stop take seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.dev_server import DEMO_CHAT_ID
from tests.databases import fresh_database, migrated_template
from tests.dev_server import free_port, start_handoff_dev
from tests.pg_servers import RestartablePostgres, restartable_postgres
from tests.support import JWT_SECRET, create_user_with_chat, parse_sse, token_for

RUN_SH = Path(__file__).parents[2] / "handlers" / "run.sh"
READY_WITHIN_S = 60
# A few seconds: the server's grace period (2 s), one probe of the database, the rest of the
# shutdown. The pool's timeout alone is 30 s.
STOPS_WITHIN_S = 10
# A reply long enough to be streaming when Postgres stops (the scripted model types a word
# every 15 ms), short enough to be waiting to store it when the server is told to stop.
CONTENT = " ".join(["word"] * 60)


@dataclass
class Server:
    """A server process: where it answers, as whom, and what it printed (still growing)."""

    origin: str
    token: str
    chat_id: str
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)

    @property
    def output(self) -> str:
        return "".join(self.lines)


Launch = Callable[[str, Path], AbstractAsyncContextManager[Server]]


@pytest.fixture(scope="module")
async def restartable_server() -> AsyncIterator[RestartablePostgres]:
    async with restartable_postgres() as server:
        yield server


@pytest.fixture(scope="module")
async def template(restartable_server: RestartablePostgres) -> AsyncIterator[str]:
    async with migrated_template(restartable_server.url()) as name:
        yield name


async def _drain(process: asyncio.subprocess.Process, lines: list[str]) -> None:
    assert process.stdout is not None
    while line := await process.stdout.readline():
        lines.append(line.decode(errors="replace"))


@asynccontextmanager
async def respond_lambda(database_url: str, _: Path) -> AsyncIterator[Server]:
    """handlers/run.sh, as the Lambda Web Adapter starts it."""
    user_id, chat_id = await create_user_with_chat(database_url)
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DATABASE_URL": database_url,
        "SUPABASE_JWT_SECRET": JWT_SECRET,
        "AWS_LWA_PORT": str(port),
    }
    process = await asyncio.create_subprocess_exec(
        str(RUN_SH), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    server = Server(f"http://127.0.0.1:{port}", token_for(user_id), str(chat_id), process)
    drain = asyncio.create_task(_drain(process, server.lines))
    try:
        await _until_ready(server)
        yield server
    finally:
        with suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        await drain


async def _until_ready(server: Server) -> None:
    async with httpx.AsyncClient(base_url=server.origin) as http, asyncio.timeout(READY_WITHIN_S):
        while True:
            with suppress(httpx.TransportError):
                if (await http.get("/healthz")).status_code == 200:
                    return
            assert server.process.returncode is None, server.output
            await asyncio.sleep(0.1)


@asynccontextmanager
async def handoff_dev(database_url: str, data_dir: Path) -> AsyncIterator[Server]:
    dev = await start_handoff_dev(database_url, data_dir)
    try:
        yield Server(dev.origin, dev.token, str(DEMO_CHAT_ID), dev.child, dev.lines)
    finally:
        await dev.kill()


async def _stream(http: httpx.AsyncClient, server: Server, started: asyncio.Event) -> bytes:
    """A turn's SSE stream, whole; `started` is set at its first token."""
    body = {"chatId": server.chat_id, "content": CONTENT}
    headers = {"Authorization": f"Bearer {server.token}"}
    received = b""
    async with http.stream("POST", "/api/chat/respond", json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        with suppress(httpx.RemoteProtocolError):  # cut off: what came is what counts
            async for chunk in response.aiter_bytes():
                received += chunk
                if b"event: token" in received:
                    started.set()
    return received


def _json_error(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == "application/json", (response, response.text)
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    error: dict[str, Any] = body["error"]
    return error


async def _stopped(process: asyncio.subprocess.Process) -> float:
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(60):
        await process.wait()
    return time.monotonic() - started


@pytest.mark.parametrize("launch", [respond_lambda, handoff_dev], ids=["run.sh", "handoff-dev"])
async def test_a_stop_while_the_database_is_down_answers_in_json_within_seconds(
    restartable_server: RestartablePostgres, template: str, tmp_path: Path, launch: Launch
) -> None:
    server_url = restartable_server.url()
    async with (
        fresh_database(server_url, template) as database_url,
        launch(database_url, tmp_path) as server,
    ):
        headers = {"Authorization": f"Bearer {server.token}"}
        async with httpx.AsyncClient(base_url=server.origin, timeout=60) as http:
            # GIVEN a server whose pool is warm, and a turn streaming its answer
            assert (await http.get("/api/chats", headers=headers)).status_code == 200
            streaming = asyncio.Event()
            turn = asyncio.create_task(_stream(http, server, streaming))
            await asyncio.wait_for(streaming.wait(), 20)
            # WHEN Postgres stops, requests wait for a connection, and the server is told to stop
            try:
                await restartable_server.stop("fast")
                waiting = [
                    asyncio.create_task(http.get("/api/chats", headers=headers)) for _ in range(2)
                ]
                await asyncio.sleep(0.5)
                seconds = await _stopped(server.process)
                answers = await asyncio.gather(*waiting)
                stream = await turn
            finally:
                await restartable_server.start()
    # THEN it stops within seconds, not the pool's timeout
    assert seconds < STOPS_WITHIN_S, (seconds, server.output)
    # AND each waiting request is answered in JSON: the server is stopping, retry soon
    for response in answers:
        assert response.status_code == 503, response.text
        assert _json_error(response)["code"] == "server_stopping"
        assert int(response.headers["retry-after"]) > 0
    # AND the turn's stream ends with an error event that says so, not cut off
    last, data = parse_sse(stream)[-1]
    assert (last, data["code"]) == ("error", "server_stopping"), stream.decode()
    # AND the server's own plain-text answer to a failed request never went out, and nothing
    # was logged as a bug: a turn the stop left unstored is a warning
    assert "Exception in ASGI application" not in server.output, server.output
    assert '"level": "error"' not in server.output, server.output
    print(json.dumps({"server": launch.__name__, "stop_seconds": round(seconds, 2)}))
