"""The dev page's protocol client needs no page: under node, with no DOM, it signs in, follows a
chat on its private channel, streams a turn, follows the reply to its end, cancels a turn,
renews a token the server refuses, and reads the members and the cascade routes' refusals,
against the real `handoff dev`."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from devkit.dev_routes import PAGE_DIR
from tests.dev_server import handoff_dev
from tests.support import fetch

DRIVER = Path(__file__).with_name("protocol_client.mjs")
DRIVER_TIMEOUT_S = 90


def node_command() -> list[str]:
    """node, with its WebSocket (a flag before node 22); skipped without node, except under CI."""
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("the protocol client test needs node; .ci/run installs it")
        pytest.skip("the protocol client test needs node")
    version = subprocess.run(  # noqa: S603
        [node, "--version"], capture_output=True, text=True, check=True
    ).stdout
    major = int(version.lstrip("v").split(".")[0])
    return [node, "--experimental-websocket"] if major < 22 else [node]


async def drive(origin: str) -> dict[str, Any]:
    child = await asyncio.create_subprocess_exec(
        *node_command(),
        str(DRIVER),
        origin,
        str(PAGE_DIR),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(DRIVER_TIMEOUT_S):
            out, err = await child.communicate()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert child.returncode == 0, err.decode() + out.decode()
    report: dict[str, Any] = json.loads(out.decode().splitlines()[-1])
    return report


async def test_the_protocol_client_runs_without_the_page(logical_database_url: str) -> None:
    node_command()
    async with handoff_dev(logical_database_url, SCRIPTED_TOKEN_DELAY_MS="5") as origin:
        report = await drive(origin)
    # The feed joined, then loaded the history under it
    assert report["states"][:2] == ["connecting", "live"]
    assert "failed" not in report
    # The turn streamed its first tokens and handed off to the background
    events = report["events"]
    assert events[0] == "metadata"
    assert "token" in events
    assert events[-1] == "handoff"
    # The reply's end came through Realtime, and is what the database holds
    [reply] = await fetch(
        logical_database_url,
        "select content, status from public.message where id = %s",
        report["replyId"],
    )
    assert reply["status"] == "completed"
    assert report["rows"][report["replyId"]] == {"status": "completed", "content": reply["content"]}
    assert reply["content"].endswith("calc returned 42.")
    # A cancel ended the second turn, and the feed showed it
    assert report["cancel"]["canceled"] is True
    assert report["rows"][report["secondId"]]["status"] == "canceled"
    # A refused token was renewed once, and the requests went through
    assert report["renewed"] == 1
    assert report["chatId"] in report["chats"]
    assert report["history"] == ["user", "assistant", "user", "assistant"]
    assert report["allHistory"] == 4
    # The members: the caller alone, as the owner; the refusals carry the server's codes
    assert report["members"] == [[report["userId"], "owner"]]
    assert report["addNobody"] == [404, "chat_or_user_not_found"]
    assert report["ownerLeaves"] == [409, "owner_stays"]
    assert report["decideNone"] == [404, "cascade_not_found"]
    assert report["cancelNone"] == [404, "cascade_not_found"]
