"""The chat page of `handoff dev` in a real Chromium: streaming, handoff, drafts, cancel,
approvals, a reload mid-job, a reply's timeline, a server restart mid-job, switching chats, a
question of the model answered with a click, regenerate and the branch switcher, pause and
resume with an instruction, a second assistant picked, added and named, an @-mention
completed, a message to both assistants answered by each, and Pause and Cancel on the second's
reply.

`chat_page.mjs` types and clicks through the page with playwright-core driving Debian's
Chromium and prints a report of what the page showed and when; this test starts the real
`handoff dev`, runs the driver against it, and holds the report against the database.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from devkit.dev_server import DEMO_CHAT_ID
from tests.dev_server import DevServer, dev_servers, free_port, start_handoff_dev
from tests.support import fetch

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("chat_page.mjs")
PLAYWRIGHT_CORE = ROOT / ".ci" / "node_modules" / "playwright-core"
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
# Slow enough for the background paragraph (eight words) to span several draft writes, which
# are throttled to one per 250 ms and which the change feed reads from the WAL every 100 ms.
TOKEN_DELAY_MS = "80"
DRIVER_TIMEOUT_S = 150
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


async def drive(
    node: str, origin: str, out: Path, server_control: Callable[[str], Awaitable[None]]
) -> dict[str, Any]:
    """Run the driver against `origin`; its report. `server_control` does what the driver asks
    of the server (STOP, START) while it waits."""
    child = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        origin,
        str(out),
        str(PLAYWRIGHT_CORE),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stderr is not None
    errors = asyncio.create_task(child.stderr.read())
    lines: list[str] = []
    try:
        async with asyncio.timeout(DRIVER_TIMEOUT_S):
            while line := (await child.stdout.readline()).decode():
                lines.append(line)
                if line.strip() in {"STOP", "START"}:
                    await server_control(line.strip())
                    child.stdin.write(b"done\n")
                    await child.stdin.drain()
            await child.wait()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    stderr = await errors
    assert child.returncode == 0, stderr.decode() + "".join(lines)
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def waterfall_text(rows: list[dict[str, Any]], columns: int = 40) -> str:
    """The timeline the page showed, as text: each row's indented name, its bar drawn at the
    place and width the page drew it, its time and marks."""
    lines = []
    for row in rows:
        bar = row["bar"]
        scale = columns / bar["trackPx"]
        start = min(columns - 1, round(bar["leftPx"] * scale))
        width = max(1, round(bar["widthPx"] * scale))
        drawn = (" " * start + "█" * width).ljust(columns)[:columns]
        name = "  " * row["depth"] + row["name"]
        marks = "".join(f" [{mark}]" for mark in row["marks"])
        lines.append(f"{name:<26} |{drawn}| {row['took']:>8}{marks}")
    return "\n".join(lines)


async def message_row(database_url: str, message_id: str) -> dict[str, Any]:
    [row] = await fetch(
        database_url, "select content, status from public.message where id = %s", message_id
    )
    return row


@pytest.mark.timeout(180)
async def test_the_page_streams_hands_off_follows_the_draft_cancels_asks_and_recovers(
    logical_database_url: str, tmp_path: Path
) -> None:
    node = node_binary()
    data_dir = tmp_path / "dev"
    # A fixed port: the page stays on its origin across the restart.
    args = ("--port", str(free_port()))
    async with dev_servers() as started:

        async def start() -> DevServer:
            server = await start_handoff_dev(
                logical_database_url, data_dir, *args, SCRIPTED_TOKEN_DELAY_MS=TOKEN_DELAY_MS
            )
            started.append(server)
            return server

        async def server_control(what: str) -> None:
            if what == "STOP":
                assert await started[-1].stop() == 0, started[-1].output
                # A new secret at the next start: the page's token is refused, once.
                (data_dir / "jwt-secret").unlink()
            else:
                resumed = await start()
                assert "Resuming 1 background job" in resumed.output, resumed.output

        first = await start()
        report = await drive(node, first.origin, tmp_path, server_control)
        assert await started[-1].stop() == 0
    print(f"chat page screenshot: {report['screenshot']}")
    handoff = report["handoff"]
    print(json.dumps({**report, "handoff": {k: v for k, v in handoff.items() if k != "timeline"}}))
    # No bound on the whole run's time: it follows the machine (98 s once on two busy cores),
    # and each step's wait (20 s) and the driver's (150 s) already end one that hangs.
    assert report["problems"] == []

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

    # A draft change lost on the way: the next one's seq skips it, and the page catches up from
    # the history at once (live, it loads the history only then), and still ends as the reply.
    gap = report["gap"]
    [dropped] = gap["dropped"]
    assert dropped["id"] == gap["assistantMessageId"]
    assert dropped["seq"] >= 3
    assert gap["historyLoads"], gap
    assert dropped["at"] < gap["historyLoads"][0] < gap["completedMs"], gap
    assert gap["final"]["status"] == "completed"
    assert gap["final"]["text"] == FINAL_TEXT
    row = await message_row(logical_database_url, gap["assistantMessageId"])
    assert (row["status"], row["content"]) == ("completed", FINAL_TEXT)

    # A tool turn's timeline, as a person sees it: closed until asked for; then a waterfall of
    # its trace, from the request through each step of the background, and the reply's usage.
    timeline = report["timeline"]
    print(f"timeline screenshot: {timeline['screenshot']}")
    print(waterfall_text(timeline["rows"]))
    assert timeline["closedBefore"] == {"expanded": "false", "panelVisible": False}
    opened = timeline["opened"]
    assert opened["expanded"] == "true"
    assert opened["controls"] == opened["panelId"]
    assert opened["headers"] == ["Span", "When", "Took"]
    rows = timeline["rows"]
    names = [row["name"] for row in rows]
    first = rows[0]
    assert (first["name"], first["depth"], first["bar"]["leftPx"]) == ("invoke_agent handoff", 0, 0)
    # In start order: the quick path's work, the handoff, then each step of the background
    assert {"load history", "store message", "chat scripted", "persist"} <= set(names)
    steps = ["handoff", "claim", "execute_tool calc", "model round", "finalize"]
    assert [names.count(step) for step in steps] == [1, 1, 1, 1, 1]
    assert [names.index(step) for step in steps] == sorted(names.index(step) for step in steps)
    by_name = {row["name"]: row for row in rows}
    assert all(by_name[step]["depth"] == 1 for step in steps)
    # Indented by depth: the round's model call sits one level below the round
    round_at = names.index("model round")
    [round_call] = [r for r in rows[round_at:] if r["name"] == "chat scripted"]
    assert round_call["depth"] == 2
    assert round_call["indentPx"] > by_name["model round"]["indentPx"] > first["indentPx"]
    # Each bar has a width and stays in its track; the steps' bars start later, in their order
    for row in rows:
        assert row["bar"]["widthPx"] > 0, row
        assert row["bar"]["leftPx"] + row["bar"]["widthPx"] <= row["bar"]["trackPx"] + 1, row
    lefts = [by_name[step]["bar"]["leftPx"] for step in steps]
    assert lefts[0] > 0, lefts
    assert lefts == sorted(lefts), lefts
    # Each row reads as text: the name, when it started, how long it took
    for row in rows:
        assert row["cells"][0].startswith(row["name"]), row
        assert re.fullmatch(r"starts at \d+(\.\d+)? m?s", row["cells"][1]), row
        assert re.fullmatch(r"\d+(\.\d+)? m?s", row["took"]), row
        assert row["cells"][2] == row["took"], row
    # A turn that went well: no failed or retried span
    assert [row["marks"] for row in rows if row["marks"]] == []
    assert re.fullmatch(rf"{len(rows)} spans over \d+(\.\d+)? m?s\.", opened["summary"])
    # The usage line sums the reply's two model calls, as stored
    [stored] = await fetch(
        logical_database_url,
        "select metadata -> 'usage' as usage from public.message where id = %s",
        timeline["assistantMessageId"],
    )
    usage = stored["usage"]
    assert len(usage["rounds"]) == 2
    assert opened["usage"] == (
        f"Usage: {usage['input']} tokens in, {usage['output']} out, in 2 model calls."
    )
    assert timeline["closed"] == {"expanded": "false", "panelVisible": False}

    # Stopped while a job ran, started again with another secret: the page said it lost the
    # server, asked for a new token once, rejoined the feed by itself and followed the resumed
    # job to its end; the next message went through.
    restart = report["restart"]
    assert restart["whileDown"]["feed"] == "Reconnecting…", restart
    assert "The server cannot be reached" in restart["whileDown"]["banner"], restart
    assert restart["sessionRequests"] == 1, restart
    assert restart["bannerAfter"] == ""
    assert restart["resumed"]["status"] == "completed"
    assert restart["resumed"]["text"] == (
        "Let me use sleep for that.\n\nHere is what I found: sleep returned slept 3s."
    )
    row = await message_row(logical_database_url, restart["assistantMessageId"])
    assert (row["status"], row["content"]) == ("completed", restart["resumed"]["text"])
    assert restart["next"]["status"] == "completed"
    assert restart["next"]["text"] == 'You said: "Welcome back"'

    # A new chat opens empty under its own address; going back shows the demo chat again, and
    # each switch leaves one change feed open.
    chats = report["chats"]
    fresh, back = chats["fresh"], chats["back"]
    assert fresh["hash"] != chats["demoHash"]
    assert (fresh["messages"], fresh["chats"], fresh["title"]) == (0, 2, "Untitled chat")
    assert fresh["feeds"]["open"] == 1
    assert (back["hash"], back["messages"]) == (chats["demoHash"], chats["demoMessages"])
    assert back["feeds"] == {"opened": fresh["feeds"]["opened"] + 1, "open": 1}

    # All of it came through supabase-js, over Realtime's websocket (V2, as supabase-js speaks
    # it), and never through the SSE change route.
    transport = report["transport"]
    assert transport["supabaseJs"]
    assert transport["sockets"], transport
    assert all("/realtime/v1/websocket?apikey=…" in url for url in transport["sockets"]), transport
    assert all("vsn=2.0.0" in url for url in transport["sockets"]), transport
    assert transport["sseRequests"] == 0
    # AND on the chats' private channels, which only their owner may join
    assert transport["publicJoins"] == 0

    # The model asks a question: its context, the question and a button per option; one click
    # answers it, and the reply goes on with that answer.
    question = report["question"]
    assert question["asked"] == {
        "label": "Waiting for your answer",
        "status": "awaiting_input",
        "question": "Which city?",
        "context": "For the trip",
        "options": ["Berlin", "Lisbon"],
    }
    assert question["answered"]["status"] == "completed"
    assert "The user answered: Berlin" in question["answered"]["text"]
    row = await message_row(logical_database_url, question["firstReplyId"])
    assert (row["status"], row["content"]) == ("completed", question["answered"]["text"])
    assert not question["branchesBefore"]  # one branch: no switcher
    # Regenerate: a new reply after the first one, on a new branch, which asks again and is
    # answered in the box for one's own words; the first stays, stale, linked to the new one.
    assert question["firstStaleOnRegenerate"] == {"label": "Stale", "link": "replaced by →"}
    assert question["askedAgain"]["options"] == ["Berlin", "Lisbon"]
    assert "The user answered: Berlin" in question["regenerated"]["text"]
    row = await message_row(logical_database_url, question["secondReplyId"])
    assert (row["status"], row["content"]) == ("completed", question["regenerated"]["text"])
    [typed] = await fetch(
        logical_database_url,
        "select metadata -> 'answers' as answers from public.message where id = %s",
        question["secondReplyId"],
    )
    assert [a["answer"] for a in typed["answers"].values()] == ["Berlin"]
    # The switcher lists both branches, the new one (named after its reply) chosen.
    assert question["newBranch"] == question["secondReplyId"]
    assert question["oldBranch"] == "main"
    assert [o["value"] for o in question["options"]] == ["main", question["secondReplyId"]]
    assert [o["selected"] for o in question["options"]] == [False, True]
    assert question["options"][0]["text"].startswith("original · ")
    assert question["options"][1]["text"].startswith("version 2 · ")
    assert "Berlin" in question["options"][0]["text"]
    # Back and forth: each time the page shows the active branch's history, as the API has it.
    back, forth = question["back"], question["forth"]
    assert back["selected"] == back["history"]["branchId"] == "main"
    assert back["shown"] == back["history"]["ids"]
    assert question["firstReplyId"] in back["shown"]
    assert question["secondReplyId"] not in back["shown"]
    assert "The user answered: Berlin" in back["reply"]["text"]
    assert forth["selected"] == forth["history"]["branchId"] == question["secondReplyId"]
    assert forth["shown"] == forth["history"]["ids"]
    assert question["secondReplyId"] in forth["shown"]
    assert question["firstReplyId"] not in forth["shown"]  # shown stale, not as current
    assert forth["reply"] == question["regenerated"]
    [active] = await fetch(
        logical_database_url,
        "select branch_id from public.active_branch where chat_id = %s",
        DEMO_CHAT_ID,
    )
    assert active["branch_id"] == question["secondReplyId"]

    # Pause while the tool runs: the reply says it is pausing, then Paused (Pause off, Cancel
    # on); Resume with an instruction lets it finish, the model told the instruction.
    paused = report["paused"]
    assert paused["pauseEnabled"]
    assert paused["pausing"]["label"] == "Pausing at its next step…"
    assert (paused["paused"]["status"], paused["paused"]["label"]) == ("paused", "Paused")
    assert not paused["paused"]["indicatorVisible"]
    assert (paused["paused"]["pauseEnabled"], paused["paused"]["cancelEnabled"]) == (False, True)
    assert paused["final"]["status"] == "completed"
    assert "gave this instruction for the rest of it: Answer in one line" in paused["final"]["text"]
    row = await message_row(logical_database_url, paused["assistantMessageId"])
    assert (row["status"], row["content"]) == ("completed", paused["final"]["text"])

    # A second assistant: the picker offers the chat's default and the deployment's others;
    # picking Calculator adds it to the chat and asks it, and its reply is named Calculator.
    assistants = report["assistants"]
    assert assistants["offered"] == ["Default: Helper", "Helper", "Add Calculator"]
    assert assistants["afterAdding"] == ["Default: Helper", "Helper", "Calculator"]
    assert assistants["named"] == "Calculator"
    # (the scripted model notes the instructions it was given: Calculator's)
    assert assistants["reply"]["text"].startswith('You said: "Which of you is this?"')
    assert "You are Calculator." in assistants["reply"]["text"]
    [row] = await fetch(
        logical_database_url,
        "select assistant_id, status from public.message where id = %s",
        assistants["assistantMessageId"],
    )
    assert (row["assistant_id"], row["status"]) == ("calculator", "completed")
    assert set(assistants["names"][:-1]) == {"Helper"}
    assert [
        (r["assistant_id"], r["is_default"])
        for r in await fetch(
            logical_database_url,
            "select assistant_id, is_default from chat_assistant where chat_id = %s"
            " order by added_at, assistant_id",
            DEMO_CHAT_ID,
        )
    ] == [("default", True), ("calculator", False)]
    # `@` offers the chat's assistants, name and id; the arrow moves, Enter completes.
    assert assistants["typedAt"] == {
        "visible": True,
        "options": ["Helper@default", "Calculator@calculator"],
        "active": "Helper@default",
        "announced": True,
    }
    assert assistants["movedDown"]["active"] == "Calculator@calculator"
    assert assistants["movedDown"]["announced"]
    assert assistants["completed"]["value"] == "Ask @calculator "
    assert not assistants["completed"]["list"]["visible"]
    assert assistants["narrowed"]["options"] == ["Helper@default"]
    # Escape closes the list and leaves the text as typed.
    assert assistants["escaped"]["value"] == "Ask @calculator and @hel"
    assert not assistants["escaped"]["list"]["visible"]

    shots = (
        report["screenshot"],
        handoff["backgroundScreenshot"],
        timeline["screenshot"],
        *question["screenshots"],
    )
    for shot in map(Path, shots):
        assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    # A message to both, by @-mention (the picker on Default): a reply each, under its
    # assistant's name, in mention order, each reaching its final text; one bubble each, none
    # left queued. The same after a reload, in the history's order.
    several = report["several"]
    replies = several["replies"]
    assert [r["name"] for r in replies] == ["Calculator", "Helper"], replies
    assert [r["bubbles"] for r in replies] == [1, 1], replies
    assert [r["status"] for r in replies] == ["completed", "completed"], replies
    said = f'You said: "{several["sent"]}"'
    assert replies[0]["text"].startswith(said)
    assert "You are Calculator." in replies[0]["text"]
    assert replies[1]["text"].startswith(said)
    assert "You are Calculator." not in replies[1]["text"]
    assert several["userBubblesSent"] == 1
    # Each bubble ends completed and, once completed, stays so (the streamed reply's stored
    # insert, which the feed may bring after `done`, does not take it back to streaming).
    statuses = several["statuses"]
    assert statuses[replies[0]["id"]] == ["streaming", "completed"], statuses
    assert statuses[replies[1]["id"]][-1] == "completed", statuses
    assert statuses[replies[1]["id"]].count("completed") == 1, statuses
    assert several["afterReload"] == replies
    assert several["shownAfterReload"] == several["history"]["ids"]
    replies_stored = await fetch(
        logical_database_url,
        "select id::text, assistant_id, status, content from public.message where id = any(%s)",
        [r["id"] for r in replies],
    )
    assert {(r["id"], r["assistant_id"], r["status"], r["content"]) for r in replies_stored} == {
        (replies[0]["id"], "calculator", "completed", replies[0]["text"]),
        (replies[1]["id"], "default", "completed", replies[1]["text"]),
    }

    # Pause and Cancel, with the picker back on Default, name the running reply's assistant.
    controlled = report["assistantControls"]
    assert controlled["named"] == "Calculator"
    assert controlled["pauseStatus"] == 202
    assert controlled["bodies"] == [
        {"route": "pause", "body": {"assistantId": "calculator"}},
        {"route": "cancel", "body": {"assistantId": "calculator"}},
    ]
    assert controlled["final"]["status"] == "canceled"
    row = await message_row(logical_database_url, controlled["assistantMessageId"])
    assert row["status"] == "canceled"
