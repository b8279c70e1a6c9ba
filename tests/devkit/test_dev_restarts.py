"""`handoff dev` stopped and started again as developers do it: Ctrl-C, `kill`, a closed
terminal, `kill -9`, a busy port. The real command in a child process, real Postgres."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from agent.snapshot import STOPPED_TEXT
from devkit.dev_server import DEMO_CHAT_ID
from tests.dev_server import HANDOFF, DevServer, dev_servers, start_handoff_dev
from tests.support import fetch, parse_sse, wait_for_row

STOP_SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


async def send(server: DevServer, content: str, chat_id: str = str(DEMO_CHAT_ID)) -> str:
    """Send a message as the demo user; the reply's id once its turn has handed off."""
    headers = {"Authorization": f"Bearer {server.token}"}
    body = {"chatId": chat_id, "content": content}
    async with httpx.AsyncClient(base_url=server.origin, timeout=30) as http:
        response = await http.post("/api/chat/respond", json=body, headers=headers)
    assert response.status_code == 200, response.text
    events = dict(parse_sse(response.content))
    assert "handoff" in events, events
    return str(events["handoff"]["assistantMessageId"])


async def wait_until_running(server: DevServer, chat_id: str, tool: str) -> None:
    """Until the chat's history shows `tool` running."""
    headers = {"Authorization": f"Bearer {server.token}"}
    async with httpx.AsyncClient(base_url=server.origin) as http, asyncio.timeout(20):
        while True:
            history = (await http.get(f"/api/chat/{chat_id}/history", headers=headers)).json()
            progress = [p for m in history["messages"] for p in m.get("progress") or []]
            if any(p["name"] == tool and p["status"] == "pending" for p in progress):
                return
            await asyncio.sleep(0.05)


async def wait_until_completed(database_url: str, message_id: str) -> dict[str, object]:
    return await wait_for_row(
        database_url,
        "select content from message where id = %s and status = 'completed'",
        message_id,
    )


async def test_a_turn_cut_off_by_kill_9_completes_after_a_restart(
    database_url: str, tmp_path: Path
) -> None:
    async with dev_servers() as started:
        first = await start_handoff_dev(database_url, tmp_path, SCRIPTED_TOKEN_DELAY_MS="1")
        started.append(first)
        # GIVEN a turn whose calc has run and whose 5 s sleep is running
        reply_id = await send(first, "/calc 6*7\n/sleep 5")
        calc = await wait_for_row(database_url, "select * from handoff.tool_results")
        assert calc["name"] == "calc"
        killed_at = datetime.now(UTC)
        # WHEN the server is killed outright
        first.child.kill()
        await first.child.wait()
        [job] = await fetch(database_url, "select status, attempt from job_runs")
        assert (job["status"], job["attempt"]) == ("processing", 1)

        # THEN the next start resumes the turn and it completes
        second = await start_handoff_dev(database_url, tmp_path, SCRIPTED_TOKEN_DELAY_MS="1")
        started.append(second)
        assert "Resuming 1 background job the last handoff dev left unfinished." in second.output
        reply = await wait_until_completed(database_url, reply_id)
        assert "calc returned 42." in str(reply["content"])
        assert "sleep returned slept 5s." in str(reply["content"])
        [job] = await fetch(database_url, "select status, attempt from job_runs")
        assert (job["status"], job["attempt"]) == ("completed", 2)
        # AND the calc that ran before the kill answered from its stored result
        results = await fetch(database_url, "select * from handoff.tool_results order by name")
        assert [r["name"] for r in results] == ["calc", "sleep"]
        assert results[0] == calc
        assert calc["created_at"] < killed_at < results[1]["created_at"]
        # AND the chat takes the next message
        async with httpx.AsyncClient(base_url=second.origin) as http:
            headers = {"Authorization": f"Bearer {second.token}"}
            body = {"chatId": str(DEMO_CHAT_ID), "content": "thanks"}
            answered = await http.post("/api/chat/respond", json=body, headers=headers)
        assert dict(parse_sse(answered.content)).keys() >= {"done"}, answered.text
        assert await second.stop() == 0


async def test_a_reply_cut_off_mid_stream_by_kill_9_ends_interrupted_at_the_next_start(
    database_url: str, tmp_path: Path
) -> None:
    async with dev_servers() as started:
        first = await start_handoff_dev(database_url, tmp_path, SCRIPTED_TOKEN_DELAY_MS="100")
        started.append(first)
        # GIVEN a reply streaming on the quick path, some of it drafted
        headers = {"Authorization": f"Bearer {first.token}"}
        body = {"chatId": str(DEMO_CHAT_ID), "content": "tell me a long story, word by word"}
        async with (
            httpx.AsyncClient(base_url=first.origin, timeout=30) as http,
            http.stream("POST", "/api/chat/respond", json=body, headers=headers) as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("event: token"):
                    break
        await wait_for_row(database_url, "select * from message_draft")
        # WHEN the server is killed outright, and started again
        await first.kill()
        [draft] = await fetch(database_url, "select * from message_draft")
        second = await start_handoff_dev(database_url, tmp_path)
        started.append(second)
        # THEN the reply at once holds what was drafted and says it was interrupted, and the
        # chat takes the next message (no lease to wait out: no server is streaming it)
        [reply] = await fetch(database_url, "select * from message where role = 'assistant'")
        assert reply["status"] == "error"
        assert reply["content"] == f"{draft['draft_content']}\n\n{STOPPED_TEXT}"
        async with httpx.AsyncClient(base_url=second.origin) as http:
            body = {"chatId": str(DEMO_CHAT_ID), "content": "thanks"}
            answered = await http.post("/api/chat/respond", json=body, headers=headers)
        assert dict(parse_sse(answered.content)).keys() >= {"done"}, answered.text
        assert await second.stop() == 0


async def test_a_second_dev_server_leaves_the_first_ones_jobs_alone(
    database_url: str, tmp_path: Path
) -> None:
    async with dev_servers() as started:
        first = await start_handoff_dev(database_url, tmp_path)
        started.append(first)
        reply_id = await send(first, "/sleep 3")
        await wait_until_running(first, str(DEMO_CHAT_ID), "sleep")
        # WHEN another dev server starts on the same database while the job runs
        second = await start_handoff_dev(database_url, tmp_path)
        started.append(second)
        # THEN it does not take the job: the first server's run finishes it, once
        assert "Another handoff dev serves this database" in second.output
        assert "Resuming" not in second.output
        await wait_until_completed(database_url, reply_id)
        [job] = await fetch(database_url, "select status, attempt from job_runs")
        assert (job["status"], job["attempt"]) == ("completed", 1)
        assert await second.stop() == 0
        assert await first.stop() == 0


async def test_a_token_from_before_a_restart_still_works(database_url: str, tmp_path: Path) -> None:
    async with dev_servers() as started:
        first = await start_handoff_dev(database_url, tmp_path)
        started.append(first)
        async with httpx.AsyncClient(base_url=first.origin) as http:
            page_token = (await http.get("/api/dev/session")).json()["token"]
        printed_token = first.token
        assert await first.stop() == 0

        port = first.origin.rsplit(":", 1)[1]
        second = await start_handoff_dev(database_url, tmp_path, "--port", port)
        started.append(second)
        async with httpx.AsyncClient(base_url=second.origin) as http:
            for token in (page_token, printed_token):
                chats = await http.get("/api/chats", headers={"Authorization": f"Bearer {token}"})
                assert chats.status_code == 200, chats.text
        # The secret is the data directory's, readable by its owner only.
        assert (tmp_path / "jwt-secret").stat().st_mode & 0o777 == 0o600
        assert await second.stop() == 0


# --- The embedded Postgres: stopped with the last dev server, however that one is stopped.


@pytest.fixture(scope="module")
def embedded_dir() -> Iterator[Path]:
    """A dev data directory shared by this module's tests: its Postgres is made once."""
    # Not under pytest's directory: the embedded server's user must traverse every parent.
    root = Path(tempfile.mkdtemp(prefix="handoff-dev-test-"))
    try:
        yield root
    finally:
        postmaster = postmaster_pid(root)
        if postmaster is not None and running(postmaster):
            os.kill(postmaster, signal.SIGQUIT)  # a test failed half-way: stop it now
        shutil.rmtree(root, ignore_errors=True)


def postmaster_pid(root: Path) -> int | None:
    pid_file = root / "postgres" / "postmaster.pid"
    return int(pid_file.read_text().split()[0]) if pid_file.exists() else None


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, within_s: float = 15) -> bool:
    deadline = time.monotonic() + within_s
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def users(root: Path) -> list[int]:
    users: list[int] = json.loads((root / "postgres" / ".handle_pids.json").read_text())
    return users


@pytest.fixture
async def embedded_servers() -> AsyncIterator[list[DevServer]]:
    async with dev_servers() as started:
        yield started


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda s: s.name)
async def test_a_signal_stops_it_cleanly_and_its_postgres_with_it(
    signum: signal.Signals, embedded_dir: Path, embedded_servers: list[DevServer]
) -> None:
    server = await start_handoff_dev(None, embedded_dir)
    embedded_servers.append(server)
    postgres = postmaster_pid(embedded_dir)
    assert postgres is not None
    assert running(postgres)
    # GIVEN a request answered and a tool running
    async with httpx.AsyncClient(base_url=server.origin) as http:
        headers = {"Authorization": f"Bearer {server.token}"}
        chat = await http.post("/api/chats", json={"title": signum.name}, headers=headers)
    await send(server, "/sleep 5", chat.json()["id"])
    await wait_until_running(server, chat.json()["id"], "sleep")
    # WHEN the server gets the signal
    code = await server.stop(signum)
    # THEN it stops without a traceback, says so, and its Postgres is stopped
    assert code == 0, server.output
    assert "Traceback" not in server.output
    assert "ERROR" not in server.output
    after_ready = server.output.split("Stop with Ctrl-C.\n", 1)[1]
    stopping = after_ready.index(f"\nStopping ({signum.name})…\n")
    assert after_ready.endswith("\nhandoff dev stopped.\n")
    # one line per request, the cut-short tool step among them
    assert '"message": "POST /api/chats 201' in after_ready
    assert "(cut short: the server stopped)" in after_ready[stopping:]
    assert wait_gone(postgres), "the embedded Postgres still runs"
    assert users(embedded_dir) == []


async def test_a_killed_servers_entry_does_not_keep_postgres_running(
    embedded_dir: Path, embedded_servers: list[DevServer]
) -> None:
    # GIVEN a dev server killed outright: its Postgres runs on, its entry stays
    killed = await start_handoff_dev(None, embedded_dir)
    embedded_servers.append(killed)
    await killed.kill()
    postgres = postmaster_pid(embedded_dir)
    assert postgres is not None
    assert running(postgres)
    assert users(embedded_dir) == [killed.child.pid]
    # WHEN the next one starts (on the same Postgres) and is stopped with Ctrl-C
    server = await start_handoff_dev(None, embedded_dir)
    embedded_servers.append(server)
    assert postmaster_pid(embedded_dir) == postgres
    assert users(embedded_dir) == [server.child.pid]
    assert await server.stop(signal.SIGINT) == 0
    # THEN the Postgres stops with it
    assert wait_gone(postgres), "the embedded Postgres still runs"
    assert users(embedded_dir) == []


def test_a_busy_port_is_said_in_one_sentence_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        done = subprocess.run(  # noqa: S603 - the project's own command
            [HANDOFF, "dev", "--port", str(port), "--data-dir", str(tmp_path / "dev")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stderr == (
        f"handoff dev: port {port} on 127.0.0.1 is in use (another handoff dev?): stop what"
        " uses it, or pick another port with --port.\n"
    )
    assert done.stdout == ""
    assert not (tmp_path / "dev").exists()  # no Postgres started, nothing written
