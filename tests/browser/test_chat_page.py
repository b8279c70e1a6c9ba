"""The chat page of `handoff dev` in a real Chromium: streaming, handoff, drafts, cancel,
approvals, a reload mid-job and switching chats.

`chat_page.mjs` types and clicks through the page with playwright-core driving Debian's
Chromium and prints a report of what the page showed and when; this test starts the real
`handoff dev`, runs the driver against it, and holds the report against the database.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from devkit.dev_server import DEMO_CHAT_ID
from tests.dev_server import handoff_dev
from tests.support import fetch

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("chat_page.mjs")
PLAYWRIGHT_CORE = ROOT / ".ci" / "node_modules" / "playwright-core"
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
# Slow enough for the background paragraph (eight words) to span several draft writes, which
# are throttled to one per 250 ms and which the change feed reads from the WAL every 100 ms.
TOKEN_DELAY_MS = "80"
DRIVER_TIMEOUT_S = 75
QUICK_TEXT = "Let me use sleep for that."
FINAL_TEXT = QUICK_TEXT + "\n\nHere is what I found: sleep returned slept 2s."


def node_binary() -> str:
    """node, with playwright-core from `npm ci --prefix .ci` and a Chromium to drive; skipped
    without them, except under CI."""
    node = shutil.which("node")
    missing = [
        what
        for what, present in (
            ("node", node is not None),
            ("playwright-core (npm ci --prefix .ci)", PLAYWRIGHT_CORE.is_dir()),
            (f"Chromium at {CHROMIUM} (apt-get install chromium)", CHROMIUM.is_file()),
        )
        if not present
    ]
    if node is None or missing:
        reason = "the browser test needs " + ", ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; .ci/run installs them")
        pytest.skip(reason)
    return node


async def drive(node: str, origin: str, out: Path) -> dict[str, Any]:
    child = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        origin,
        str(out),
        str(PLAYWRIGHT_CORE),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(DRIVER_TIMEOUT_S):
            stdout, stderr = await child.communicate()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert child.returncode == 0, stderr.decode() + stdout.decode()
    report: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return report


async def message_row(database_url: str, message_id: str) -> dict[str, Any]:
    [row] = await fetch(
        database_url, "select content, status from public.message where id = %s", message_id
    )
    return row


async def test_the_page_streams_hands_off_follows_the_draft_cancels_and_asks(
    logical_database_url: str, tmp_path: Path
) -> None:
    node = node_binary()
    async with handoff_dev(logical_database_url, SCRIPTED_TOKEN_DELAY_MS=TOKEN_DELAY_MS) as origin:
        report = await drive(node, origin, tmp_path)
    print(f"chat page screenshot: {report['screenshot']}")
    handoff = report["handoff"]
    print(json.dumps({**report, "handoff": {k: v for k, v in handoff.items() if k != "timeline"}}))
    assert report["problems"] == []
    assert report["elapsedMs"] < 60_000

    # The demo chat is preselected, and named in the address.
    opening = report["opening"]
    assert opening["hash"] == f"#chat={DEMO_CHAT_ID}"
    assert opening["selectedChatId"] == str(DEMO_CHAT_ID)
    assert opening["title"] == "Demo chat"

    # Typed with Shift+Enter between the lines, sent with Enter, shown at once.
    assert handoff["userBubbleShown"] == "/sleep 2\nWhat is the weather like?"
    # Once sent, that bubble goes by the id the server stored the message under.
    [user_bubble] = handoff["userBubbles"]
    [stored] = await fetch(
        logical_database_url, "select content from public.message where id = %s", user_bubble
    )
    assert stored["content"] == handoff["userBubbleShown"]
    assert handoff["inputClearedOnSend"]
    # The quick path's tokens fill the bubble word by word before the handoff shows.
    assert handoff["tokensBeforeIndicator"], handoff["timeline"]
    assert handoff["firstTokenMs"] < handoff["indicatorShownMs"] < handoff["completedMs"]
    assert len(handoff["quickPathLengths"]) >= 4, handoff["quickPathLengths"]
    assert handoff["textAtHandoff"] == QUICK_TEXT
    assert handoff["cancelEnabledInBackground"]
    # While the indicator shows, the draft grows in several steps, from the streamed text on.
    grown = handoff["draftLengthsWhileIndicator"]
    assert grown[0] == len(QUICK_TEXT)
    assert len(grown) >= 4, handoff["timeline"]
    assert grown == sorted(set(grown))
    assert grown[-1] <= len(FINAL_TEXT)
    assert "sleep:completed" in handoff["chipsSeen"]
    # The final text is the message's content, the indicator gone.
    assert handoff["final"] == {
        "status": "completed",
        "text": FINAL_TEXT,
        "label": "",
        "indicatorVisible": False,
    }
    assert not handoff["cancelEnabledAfter"]
    row = await message_row(logical_database_url, handoff["assistantMessageId"])
    assert (row["status"], row["content"]) == ("completed", handoff["final"]["text"])

    # A second message while the job runs is refused and stays in the box.
    cancel = report["cancel"]
    refused = cancel["refusedWhileRunning"]
    assert "still being prepared" in refused["error"], refused
    assert refused["keptInBox"] == "Are you still there?"
    assert not refused["refusedTextInBubbles"]
    # Canceled in the background: the text shown so far stays, labelled.
    assert cancel["final"]["status"] == "canceled"
    assert cancel["final"]["label"] == "Canceled"
    assert cancel["final"]["text"].startswith(QUICK_TEXT)
    assert not cancel["final"]["indicatorVisible"]
    assert cancel["canceledShownMs"] > cancel["cancelClickedMs"]
    row = await message_row(logical_database_url, cancel["assistantMessageId"])
    assert (row["status"], row["content"]) == ("canceled", cancel["final"]["text"])

    # A call that needs approval: the card names it, Approve lets it run.
    approval = report["approval"]
    assert approval["tool"] == "send_email"
    assert approval["args"] == {"to": "ada@example.com", "subject": "Minutes \u202etxt.exe"}
    # The card shows the override as an escape, not as an override.
    assert '"subject": "Minutes \\u202etxt.exe"' in approval["argsText"]
    assert "\u202e" not in approval["argsText"]
    assert approval["final"]["status"] == "completed"
    row = await message_row(logical_database_url, approval["assistantMessageId"])
    assert (row["status"], row["content"]) == ("completed", approval["final"]["text"])
    assert "Email to ada@example.com sent" in row["content"]

    # Reloaded while the job runs: rebuilt from history, still following the job to its end.
    reload = report["reload"]
    assert reload["afterReload"]["indicatorVisible"], reload
    assert reload["afterReload"]["status"] in {"queued", "streaming"}
    assert len(reload["lengthsAfterReload"]) >= 2, reload
    assert reload["final"]["status"] == "completed"
    assert reload["final"]["text"] == FINAL_TEXT
    assert reload["messagesShown"] == 8  # four turns, each a question and an answer

    # A new chat opens empty under its own address; going back shows the demo chat again, and
    # each switch leaves one change feed open.
    chats = report["chats"]
    fresh, back = chats["fresh"], chats["back"]
    assert fresh["hash"] != chats["demoHash"]
    assert (fresh["messages"], fresh["chats"], fresh["title"]) == (0, 2, "Untitled chat")
    assert fresh["feeds"]["open"] == 1
    assert (back["hash"], back["messages"]) == (chats["demoHash"], chats["demoMessages"])
    assert back["feeds"] == {"opened": fresh["feeds"]["opened"] + 1, "open": 1}

    for shot in (Path(report["screenshot"]), Path(handoff["backgroundScreenshot"])):
        assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
