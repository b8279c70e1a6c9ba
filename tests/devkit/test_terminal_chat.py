"""`handoff chat` against a running `handoff dev`, both as a person runs them."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import signal
import termios
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.dev_home import DevHome
from devkit.dev_routes import BAD_EMAIL
from devkit.dev_server import DEMO_CHAT_ID
from devkit.terminal_chat import POSTED
from tests.dev_server import HANDOFF, dev_servers, handoff_dev, start_handoff_dev
from tests.support import execute, fetch, token_for, wait_for_row

REPLY_SQL = "select content, status from message where role = 'assistant'"
DROP_MESSAGES_POLICIES_SQL = """
do $$
declare p record;
begin
  for p in select policyname from pg_policies where schemaname = 'realtime'
    and tablename = 'messages'
  loop
    execute format('drop policy %%I on realtime.messages', p.policyname);
  end loop;
end
$$
"""
STARTED: list[asyncio.subprocess.Process] = []


@dataclass
class Transcript:
    status: int
    out: str
    err: str


@pytest.fixture
async def dev(logical_database_url: str) -> AsyncIterator[str]:
    async with handoff_dev(logical_database_url, SCRIPTED_TOKEN_DELAY_MS="5") as origin:
        yield origin


def default_ctrl_c() -> None:
    """Ctrl-C as a terminal delivers it, even when the suite runs with SIGINT ignored (a shell's
    background job), which a child would otherwise inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def start_chat(
    origin: str, *args: str, stdin: int = asyncio.subprocess.DEVNULL
) -> asyncio.subprocess.Process:
    child = await asyncio.create_subprocess_exec(
        HANDOFF,
        "chat",
        "--url",
        origin,
        *args,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=default_ctrl_c,
    )
    STARTED.append(child)
    return child


@pytest.fixture(autouse=True)
async def no_chat_outlives_its_test() -> AsyncIterator[None]:
    """A test that fails half-way leaves no `handoff chat` waiting on a server that is gone."""
    yield
    while STARTED:
        child = STARTED.pop()
        if child.returncode is None:
            child.kill()
            await child.wait()


async def finished(child: asyncio.subprocess.Process) -> Transcript:
    async with asyncio.timeout(60):
        out, err = await child.communicate()
    assert child.returncode is not None
    return Transcript(child.returncode, out.decode(), err.decode())


async def handoff_chat(origin: str, *args: str) -> Transcript:
    return await finished(await start_chat(origin, *args))


async def test_a_quick_answer_streams_and_exits_zero(dev: str, logical_database_url: str) -> None:
    chat = await handoff_chat(dev, "hello there")
    assert chat.status == 0, chat.err
    [reply] = await fetch(
        logical_database_url, "select content from message where role = 'assistant'"
    )
    # the reply named by its assistant, the chat's default
    assert chat.out == "Helper: " + reply["content"] + "\n"


async def test_a_tool_turn_shows_tokens_then_progress_then_the_final_text(
    dev: str, logical_database_url: str
) -> None:
    # WHEN a message needs a slow tool
    chat = await handoff_chat(dev, "/sleep 1\nAnd then?")
    assert chat.status == 0, chat.err
    [reply] = await fetch(logical_database_url, REPLY_SQL)
    assert reply["status"] == "completed"
    labelled, *progress, final = chat.out.rstrip("\n").split("\n")
    # THEN the quick path's words come first, on their own line, after the assistant's name
    assert labelled.startswith("Helper: ")
    streamed = labelled.removeprefix("Helper: ")
    assert reply["content"].startswith(streamed)
    # AND the background's progress, read from the change feed
    assert progress[0] == "  … continuing in the background"
    assert "  … sleep running" in progress
    # the tool shows done before any of the next round's text: drafts come after it (a round
    # this short may end, and its draft go, before the feed reads it, as with Realtime)
    writing = [i for i, line in enumerate(progress) if line.startswith("  … writing")]
    assert all(progress.index("  … sleep done") < i for i in writing)
    assert len(set(progress)) == len(progress)  # each step said once
    # AND last, the rest of the final text
    assert reply["content"].endswith(final)
    assert final not in streamed


async def test_another_chat_and_a_chat_that_is_not_yours(dev: str) -> None:
    async with httpx.AsyncClient(base_url=dev) as http:
        token = (await http.get("/api/dev/session")).json()["token"]
        created = await http.post(
            "/api/chats", json={"title": "second"}, headers={"Authorization": f"Bearer {token}"}
        )
    chat_id = created.json()["id"]
    chat = await handoff_chat(dev, "in the second chat", "--chat", chat_id)
    assert chat.status == 0, chat.err
    missing = await handoff_chat(dev, "hello", "--chat", "00000000-0000-4000-8000-000000000001")
    assert (missing.status, missing.err) == (1, "handoff chat: Chat not found.\n")


async def test_an_assistant_asked_by_id_answers_under_its_name(
    dev: str, logical_database_url: str
) -> None:
    # GIVEN the calculator takes part in the demo chat
    async with httpx.AsyncClient(base_url=dev) as http:
        session = (await http.get("/api/dev/session")).json()
        added = await http.post(
            f"/api/chats/{session['chatId']}/assistants",
            json={"assistantId": "calculator"},
            headers={"Authorization": f"Bearer {session['token']}"},
        )
        assert added.status_code == 200, added.text
    # WHEN the calculator is asked by its id
    chat = await handoff_chat(dev, "hello there", "--assistant", "calculator")
    assert chat.status == 0, chat.err
    # THEN it answered (with its own instructions), and the screen names it
    [reply] = await fetch(
        logical_database_url,
        "select assistant_id, content from message where role = 'assistant'",
    )
    assert reply["assistant_id"] == "calculator"
    assert "You are Calculator." in reply["content"]
    assert chat.out == "Calculator: " + reply["content"] + "\n"
    # AND an id no assistant has is refused in one line naming it, with nothing on stdout (no
    # empty line before it), nothing stored
    unknown = await handoff_chat(dev, "hello", "--assistant", "nobody")
    assert (unknown.status, unknown.out) == (1, "")
    assert unknown.err == "handoff chat: No such assistant: nobody.\n"
    assert len(await fetch(logical_database_url, "select id from message")) == 2


# A deployment's own assistants, two of them: both with a tool that takes its time (BOTH_SLOW:
# the other reply may end while the first is followed), or the first without (QUICK_FIRST: the
# first answers at once, and the other is followed in the background after it).
PAIR_OF_ASSISTANTS = """
from agent.assistants import Assistant
from demo.tools import sleep

BETA = Assistant(id="beta", name="Beta", instructions="You are Beta.", tools=[sleep])
BOTH_SLOW = [
    Assistant(id="alpha", name="Alpha", instructions="You are Alpha.", tools=[sleep]),
    BETA,
]
QUICK_FIRST = [Assistant(id="alpha", name="Alpha", instructions="You are Alpha."), BETA]
"""


@pytest.mark.parametrize("deployment", ["BOTH_SLOW", "QUICK_FIRST"])
async def test_a_message_to_two_assistants_shows_both_replies_to_their_end(
    logical_database_url: str, tmp_path: Path, deployment: str
) -> None:
    (tmp_path / "pair_of_assistants.py").write_text(PAIR_OF_ASSISTANTS)
    async with dev_servers() as started:
        server = await start_handoff_dev(
            logical_database_url,
            tmp_path / "dev",
            ASSISTANTS=f"pair_of_assistants:{deployment}",
            PYTHONPATH=str(tmp_path),
            SCRIPTED_TOKEN_DELAY_MS="5",
        )
        started.append(server)
        # GIVEN both in the demo chat
        async with httpx.AsyncClient(base_url=server.origin) as http:
            session = (await http.get("/api/dev/session")).json()
            added = await http.post(
                f"/api/chats/{session['chatId']}/assistants",
                json={"assistantId": "beta"},
                headers={"Authorization": f"Bearer {session['token']}"},
            )
            assert added.status_code == 200, added.text
        # WHEN a message names both, and each goes on in the background with its tool
        chat = await handoff_chat(server.origin, "@alpha @beta hi\n/sleep 1")
        await server.stop()
    assert chat.status == 0, chat.err
    replies = {
        r["assistant_id"]: r
        for r in await fetch(
            logical_database_url,
            "select assistant_id, content, status from message where role = 'assistant'",
        )
    }
    assert {a: r["status"] for a, r in replies.items()} == {
        "alpha": "completed",
        "beta": "completed",
    }
    # THEN the first streams under its name, then the other, under its own, each to its end
    out = chat.out
    assert out.startswith("Alpha: "), out
    alpha_end = out.index(replies["alpha"]["content"].rsplit("\n", 1)[-1])
    beta_at = out.index("\nBeta:") + 1
    assert "You are Alpha." in replies["alpha"]["content"]
    assert alpha_end < beta_at, out
    assert replies["beta"]["content"].rsplit("\n", 1)[-1] in out[beta_at:], out
    assert "You are Beta." in out[beta_at:], out
    assert "You are Beta." not in out[:beta_at], out


async def test_in_a_shared_chat_a_message_to_nobody_is_posted_and_says_so(
    dev: str, logical_database_url: str
) -> None:
    # GIVEN the demo chat shared with Bea
    await execute(
        logical_database_url,
        "insert into auth.users (id, email) values (%s, %s)",
        uuid.uuid4(),
        "bea@example.com",
    )
    async with httpx.AsyncClient(base_url=dev) as http:
        session = (await http.get("/api/dev/session")).json()
        added = await http.post(
            f"/api/chats/{session['chatId']}/members",
            json={"email": "bea@example.com"},
            headers={"Authorization": f"Bearer {session['token']}"},
        )
        assert added.status_code == 201, added.text
    # WHEN the owner sends a message that names no assistant
    chat = await handoff_chat(dev, "hello everyone")
    # THEN it is posted, answered by nobody, and the screen says so in one line, naming no one
    assert chat.status == 0, chat.err
    assert chat.out == POSTED + "\n"
    rows = await fetch(logical_database_url, "select role, content from message")
    assert [(r["role"], r["content"]) for r in rows] == [("user", "hello everyone")]


async def test_as_a_second_local_person_in_a_shared_chat(
    dev: str, logical_database_url: str
) -> None:
    # GIVEN Bob, signed in once from the terminal: made on first use, his own chat still empty
    first = await handoff_chat(dev, "--as", "bob@example.com", "--history")
    assert (first.status, first.out, first.err) == (0, "", "")
    # AND the demo user shares the demo chat with him, by his e-mail
    async with httpx.AsyncClient(base_url=dev) as http:
        session = (await http.get("/api/dev/session")).json()
        added = await http.post(
            f"/api/chats/{session['chatId']}/members",
            json={"email": "bob@example.com"},
            headers={"Authorization": f"Bearer {session['token']}"},
        )
        assert added.status_code == 201, added.text
    # WHEN Bob writes in it from the terminal
    chat = str(DEMO_CHAT_ID)
    said = await handoff_chat(dev, "--as", "bob@example.com", "--chat", chat, "@default hi, Bob")
    assert said.status == 0, said.err
    # THEN the message is his, and each of them sees who wrote it
    [sent] = await fetch(
        logical_database_url,
        "select u.email from message m join auth.users u on u.id = m.sender_id"
        " where m.role = 'user'",
    )
    assert sent["email"] == "bob@example.com"
    bobs = await handoff_chat(dev, "--as", "bob@example.com", "--chat", chat, "--history")
    demos = await handoff_chat(dev, "--history")
    assert " You: @default hi, Bob" in bobs.out, bobs.out
    assert " bob@example.com: @default hi, Bob" in demos.out, demos.out
    # AND what is no e-mail is refused in one line, on stderr alone
    refused = await handoff_chat(dev, "--as", "bob", "hello")
    assert (refused.status, refused.out) == (1, "")
    assert refused.err == f"handoff chat: {BAD_EMAIL}\n"


async def test_approval_is_asked_for_and_can_come_from_elsewhere(
    dev: str, logical_database_url: str
) -> None:
    # The subject hides a bidi override and a clear-screen: the question shows both as escapes.
    child = await start_chat(
        dev,
        '/send_email {"to": "a@example.com", "subject": "hi\\u202eexe.pdf", "body": "x\\u001b[2J"}',
    )
    # The terminal has no keyboard here, so it says where to answer.
    row = await wait_for_row(
        logical_database_url,
        "select metadata -> 'pendingApproval' ->> 'toolCallId' as call from message"
        " where status = 'awaiting_approval'",
    )
    async with httpx.AsyncClient(base_url=dev) as http:
        token = (await http.get("/api/dev/session")).json()["token"]
        decided = await http.post(
            f"/api/chat/{DEMO_CHAT_ID}/approvals/{row['call']}",
            json={"approved": False, "note": "not now"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert decided.status_code == 202, decided.text
    chat = await finished(child)
    assert chat.status == 0, chat.err
    assert "waiting for approval of send_email" in chat.out
    assert f"answer it at {dev}/" in chat.out
    assert '"subject": "hi\\u202eexe.pdf"' in chat.out
    assert '"body": "x\\u001b[2J"' in chat.out
    assert "\u202e" not in chat.out
    assert "\x1b[2J" not in chat.out


async def test_ctrl_c_in_the_background_cancels_the_turn(
    dev: str, logical_database_url: str
) -> None:
    child = await start_chat(dev, "/sleep 30")
    await wait_for_row(logical_database_url, "select 1 from job_runs where kind = 'handoff'")
    assert child.stdout is not None
    # Once the terminal shows the background phase, the user presses Ctrl-C
    async with asyncio.timeout(30):
        while b"continuing in the background" not in await child.stdout.readline():
            pass
    child.send_signal(signal.SIGINT)
    chat = await finished(child)
    assert chat.status == 130
    assert "[canceled]" in chat.out
    [reply] = await fetch(
        logical_database_url, "select status from message where role = 'assistant'"
    )
    assert reply["status"] == "canceled"


async def test_without_a_dev_server_it_says_how_to_start_one() -> None:
    chat = await handoff_chat("http://127.0.0.1:9", "hello")
    assert chat.status == 1
    assert chat.err == (
        "handoff chat: no Handoff dev server at http://127.0.0.1:9: start one with `handoff dev`\n"
    )


async def test_without_logical_decoding_it_polls_and_still_finishes(
    replica_database_url: str,
) -> None:
    async with handoff_dev(replica_database_url, SCRIPTED_TOKEN_DELAY_MS="5") as origin:
        chat = await handoff_chat(origin, "/calc 6*7\nAnd then?")
    assert chat.status == 0, chat.err
    assert "(live progress unavailable: The database runs with wal_level=replica;" in chat.out
    # The database is shared with other tests: only the demo chat is this test's.
    [reply] = await fetch(replica_database_url, REPLY_SQL + " and chat_id = %s", DEMO_CHAT_ID)
    assert reply["status"] == "completed"
    assert chat.out.rstrip("\n").endswith(reply["content"].rsplit("\n", 1)[-1])


async def test_a_chat_channel_the_user_may_not_read_is_not_followed(
    dev: str, logical_database_url: str
) -> None:
    # GIVEN no policy on realtime.messages lets anyone read a chat's private channel
    await execute(logical_database_url, DROP_MESSAGES_POLICIES_SQL)
    # WHEN the user chats
    chat = await handoff_chat(dev, "/calc 6*7\nAnd then?")
    # THEN the chat's channel is not joined, and the terminal says so and polls instead
    assert chat.status == 0, chat.err
    assert (
        "(live progress unavailable: Unauthorized: You do not have permissions to read from this"
        f" Channel topic: chat:{DEMO_CHAT_ID} Polling instead.)"
    ) in chat.out
    [reply] = await fetch(logical_database_url, REPLY_SQL)
    assert reply["status"] == "completed"
    assert chat.out.rstrip("\n").endswith(reply["content"].rsplit("\n", 1)[-1])


async def test_a_tool_stopped_after_its_time_shows_as_failed_and_why(
    logical_database_url: str,
) -> None:
    # GIVEN a dev server whose tools may run half a second
    async with handoff_dev(
        logical_database_url, SCRIPTED_TOKEN_DELAY_MS="5", TOOL_TIMEOUT_S="0.5"
    ) as origin:
        # WHEN a message asks for a 30 s sleep
        chat = await handoff_chat(origin, "/sleep 30\nAnd then?")
    assert chat.status == 0, chat.err
    # THEN the person sees the tool failed, with the progress entry's note
    assert "  … sleep failed (Stopped: it took longer than 0.5 s.)" in chat.out.split("\n")
    [reply] = await fetch(logical_database_url, REPLY_SQL)
    assert reply["status"] == "completed"
    assert "sleep took longer than 0.5 s and was stopped." in reply["content"]


async def read_until(child: asyncio.subprocess.Process, text: bytes) -> bytes:
    """What the chat printed up to and including `text`."""
    assert child.stdout is not None
    async with asyncio.timeout(30):
        return await child.stdout.readuntil(text)


@pytest.mark.parametrize("phase", ["quick path", "background"])
async def test_when_the_server_dies_mid_turn_it_says_so_in_one_line_and_exits_1(
    phase: str, logical_database_url: str, tmp_path: Path
) -> None:
    async with dev_servers() as started:
        # Slow tokens, so that the quick path is still streaming when the server dies.
        delay = "300" if phase == "quick path" else "5"
        server = await start_handoff_dev(
            logical_database_url, tmp_path, SCRIPTED_TOKEN_DELAY_MS=delay
        )
        started.append(server)
        message = "/sleep 30" if phase == "background" else "tell me a long story, word by word"
        child = await start_chat(server.origin, message)
        await read_until(
            child, b"continuing in the background" if phase == "background" else b"You "
        )
        # WHEN the server is killed
        await server.kill()
        # THEN the chat ends at once, with one line on stderr and exit code 1
        chat = await finished(child)
    assert chat.status == 1
    assert chat.err == (
        f"handoff chat: the server at {server.origin} went away before the turn ended; once it"
        " is back, the chat page shows the answer\n"
    )


async def test_ctrl_c_after_the_server_died_says_the_turn_was_not_canceled(
    logical_database_url: str, tmp_path: Path
) -> None:
    async with dev_servers() as started:
        server = await start_handoff_dev(logical_database_url, tmp_path)
        started.append(server)
        child = await start_chat(server.origin, "/sleep 30")
        await read_until(child, b"continuing in the background")
        # The chat's change feed and the server are gone at once: Ctrl-C may come first.
        server.child.send_signal(signal.SIGSTOP)
        child.send_signal(signal.SIGINT)
        chat = await finished(child)
        await server.kill()
    assert chat.status == 130
    assert "Traceback" not in chat.err
    assert chat.out.endswith(f"[not canceled: the server at {server.origin} cannot be reached]\n")


QUESTION = (
    '/ask_user {"question": "Which city?\\u001b[2J", "options": ["Berlin", "Lisbon"],'
    ' "context": "For the \\u202etrip"}'
)


async def test_a_question_is_answered_on_the_keyboard(dev: str, logical_database_url: str) -> None:
    # GIVEN a terminal to type on (stdin a pseudo-terminal that does not echo)
    keyboard, terminal = pty.openpty()
    attributes = termios.tcgetattr(terminal)
    attributes[3] &= ~termios.ECHO
    termios.tcsetattr(terminal, termios.TCSANOW, attributes)
    try:
        # WHEN the model asks a question with two options
        child = await start_chat(dev, QUESTION, stdin=terminal)
        asked = await read_until(child, b"Answer (1-2, or your own words): ")
        # THEN it shows the context, the question and the numbered options, escaped
        text = asked.decode()
        assert "The assistant asks:\n  (For the \\u202etrip)\n  Which city?\\u001b[2J\n" in text
        assert "    1. Berlin\n    2. Lisbon\n" in text
        assert "\u202e" not in text
        assert "\x1b[2J" not in text
        # AND typing a number answers with that option
        os.write(keyboard, b"2\n")
        chat = await finished(child)
    finally:
        os.close(keyboard)
        os.close(terminal)
    assert chat.status == 0, chat.err
    [reply] = await fetch(logical_database_url, REPLY_SQL)
    assert reply["status"] == "completed"
    assert "The user answered: Lisbon" in reply["content"]
    assert chat.out.rstrip("\n").endswith("The user answered: Lisbon.")
    [answers] = await fetch(
        logical_database_url,
        "select metadata -> 'answers' as answers from message where role = 'assistant'",
    )
    assert [a["answer"] for a in answers["answers"].values()] == ["Lisbon"]


async def test_without_a_keyboard_a_question_says_where_to_answer(
    dev: str, logical_database_url: str
) -> None:
    child = await start_chat(dev, QUESTION)
    row = await wait_for_row(
        logical_database_url,
        "select metadata -> 'pendingQuestion' ->> 'questionId' as question from message"
        " where status = 'awaiting_input'",
    )
    async with httpx.AsyncClient(base_url=dev) as http:
        token = (await http.get("/api/dev/session")).json()["token"]
        answered = await http.post(
            f"/api/chat/{DEMO_CHAT_ID}/answers/{row['question']}",
            json={"answer": "Porto, in the end"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answered.status_code == 202, answered.text
    chat = await finished(child)
    assert chat.status == 0, chat.err
    assert "the assistant asks:\n  (For the \\u202etrip)\n  Which city?" in chat.out
    assert f"answer it at {dev}/" in chat.out
    assert chat.out.rstrip("\n").endswith("The user answered: Porto, in the end.")


async def respond_fully(
    http: httpx.AsyncClient, token: str, path: str, body: dict[str, Any]
) -> str:
    """A turn's stream read to its end; the metadata event's reply id."""
    headers = {"Authorization": f"Bearer {token}"}
    response = await http.post(path, json=body, headers=headers)
    assert response.status_code == 200, response.text
    [metadata] = [line for line in response.text.splitlines() if line.startswith('data: {"chatId"')]
    return str(json.loads(metadata.removeprefix("data: "))["assistantMessageId"])


async def test_history_names_the_senders_and_marks_what_was_replaced(
    logical_database_url: str, tmp_path: Path
) -> None:
    member_id = uuid.uuid4()
    await execute(
        logical_database_url,
        "insert into auth.users (id, email) values (%s, %s)",
        member_id,
        "bea@example.com",
    )
    async with dev_servers() as started:
        server = await start_handoff_dev(
            logical_database_url, tmp_path, SCRIPTED_TOKEN_DELAY_MS="5"
        )
        started.append(server)
        owner = server.token
        member = token_for(member_id, secret=DevHome(tmp_path).jwt_secret())
        chat = str(DEMO_CHAT_ID)
        async with httpx.AsyncClient(base_url=server.origin, timeout=30) as http:
            # GIVEN the demo chat shared with Bea, the owner's message answered twice (the
            # first reply replaced, stale), then Bea's message
            added = await http.post(
                f"/api/chats/{chat}/members",
                json={"email": "bea@example.com"},
                headers={"Authorization": f"Bearer {owner}"},
            )
            assert added.status_code == 201, added.text
            first = await respond_fully(
                http, owner, "/api/chat/respond", {"chatId": chat, "content": "@default hi all"}
            )
            again = await respond_fully(
                http, owner, f"/api/chat/{chat}/messages/{first}/regenerate", {}
            )
            await respond_fully(
                http, member, "/api/chat/respond", {"chatId": chat, "content": "@default from Bea"}
            )
        # WHEN the owner prints the chat
        shown = await handoff_chat(server.origin, "--history")
        await server.stop()
    assert shown.status == 0, shown.err
    lines = shown.out.splitlines()
    # THEN each user message is under its sender: "You" for the caller, the member's e-mail
    assert any(line.endswith(" You: @default hi all") for line in lines), shown.out
    assert any(line.endswith(" bea@example.com: @default from Bea") for line in lines), shown.out
    # AND the replaced reply is marked stale, with the short id of its replacement, printed too
    at = next(i for i, line in enumerate(lines) if line.startswith(f"[{first[:8]}] Helper: "))
    assert lines[at + 1] == f"    (stale: replaced by [{again[:8]}])"
    assert any(line.startswith(f"[{again[:8]}] Helper: ") for line in lines), shown.out
