"""`handoff chat`: one turn in the terminal, against a running `handoff dev`.

Tokens print as they stream; once the turn hands off, a spinner shows the background job's
progress from the change feed (the page's Realtime stand-in), then the final text prints.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TextIO
from uuid import UUID

import httpx
from httpx_sse import EventSource, aconnect_sse

from agent.display import display_arguments, visible

FINAL_STATUSES = frozenset({"completed", "error", "canceled"})
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
POLL_S = 0.5  # history polling, when the server cannot decode changes

# Asked when a tool waits for approval: the question, and whether the user approved.
Ask = Callable[[str], Awaitable[bool]]


class ChatFailed(Exception):
    """The turn could not run; the message says why, in the user's terms."""


@dataclass
class Screen:
    """Text on `out`, with a spinner line under it when `out` is a terminal."""

    out: TextIO
    animated: bool
    status: str = ""
    _frame: int = 0
    _drawn: bool = field(default=False, repr=False)

    def write(self, text: str) -> None:
        self._erase()
        self.out.write(text)
        self.out.flush()

    def line(self, text: str) -> None:
        self.write(text + "\n")

    def set_status(self, status: str) -> None:
        if status == self.status:
            return
        self.status = status
        if not self.animated:
            self.line(f"  … {status}")

    def tick(self) -> None:
        if self.animated and self.status:
            self._frame = (self._frame + 1) % len(SPINNER)
            self.out.write(f"\r\x1b[2K{SPINNER[self._frame]} {self.status}")
            self.out.flush()
            self._drawn = True

    def _erase(self) -> None:
        if self._drawn:
            self.out.write("\r\x1b[2K")
            self._drawn = False


def error_text(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


@dataclass
class Session:
    http: httpx.AsyncClient
    headers: dict[str, str]
    chat_id: str
    origin: str

    @classmethod
    async def open(cls, http: httpx.AsyncClient, chat: UUID | None) -> Session:
        try:
            response = await http.get("/api/dev/session")
        except httpx.TransportError as exc:
            raise ChatFailed(
                f"no Handoff dev server at {http.base_url}: start one with `handoff dev`"
            ) from exc
        if response.status_code != 200:
            raise ChatFailed(f"{http.base_url} is not a `handoff dev` server")
        body = response.json()
        headers = {"Authorization": f"Bearer {body['token']}"}
        return cls(http, headers, str(chat or body["chatId"]), str(http.base_url).rstrip("/"))

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post(path, json=body, headers=self.headers)

    def events(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> AbstractAsyncContextManager[EventSource]:
        # aconnect_sse adds its Accept header to the dict it is handed: give it a copy.
        return aconnect_sse(self.http, method, path, json=body, headers=dict(self.headers))


@asynccontextmanager
async def message_changes(
    session: Session, screen: Screen
) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
    """Rows of `message` and `message_draft` as they change, from the moment this yields."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    subscribed = asyncio.get_running_loop().create_future()

    async def feed() -> None:
        path = f"/api/dev/chat/{session.chat_id}/changes"
        async with session.events("GET", path) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                subscribed.set_result(error_text(source.response))
                return
            async for sse in source.aiter_sse():
                if sse.event == "subscribed":
                    subscribed.set_result(None)
                elif sse.event == "postgres_changes":
                    queue.put_nowait(sse.json())

    task = asyncio.create_task(feed())
    try:
        async with asyncio.timeout(15):
            problem = await asyncio.shield(subscribed)
        if problem is not None:
            screen.line(f"(live progress unavailable: {problem} Polling instead.)")
            task = asyncio.create_task(_poll_history(session, queue))
        yield queue
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


async def _poll_history(session: Session, queue: asyncio.Queue[dict[str, Any]]) -> None:
    """The feed's `message` changes, read from the history endpoint instead."""
    path = f"/api/chat/{session.chat_id}/history"
    while True:
        response = await session.http.get(path, headers=session.headers)
        for message in response.json().get("messages", []) if response.is_success else []:
            metadata = {
                "snapshot": {"progress": message.get("progress", [])},
                "pendingApproval": message.get("pendingApproval"),
            }
            row = {**message, "metadata": metadata}
            queue.put_nowait({"table": "message", "eventType": "UPDATE", "new": row})
        await asyncio.sleep(POLL_S)


async def stream_turn(session: Session, content: str, screen: Screen) -> tuple[str, str | None]:
    """Stream the quick path; the text shown, and the assistant message id if it handed off."""
    shown = ""
    body = {"chatId": session.chat_id, "content": content}
    async with session.events("POST", "/api/chat/respond", body) as source:
        if source.response.status_code != 200:
            await source.response.aread()
            raise ChatFailed(error_text(source.response))
        async for sse in source.aiter_sse():
            event, data = sse.event, sse.json()
            if event == "token":
                shown += data["text"]
                screen.write(data["text"])
            elif event == "done":
                return data["content"], None
            elif event == "handoff":
                return shown, str(data["assistantMessageId"])
            elif event == "error":
                raise ChatFailed(data["message"])
    raise ChatFailed("the server closed the stream before the turn ended")


def progress_text(row: dict[str, Any]) -> str:
    progress = (row.get("metadata") or {}).get("snapshot", {}).get("progress", [])
    marks = {"completed": "done", "error": "failed", "pending": "running"}
    return ", ".join(
        f"{p['name']} {marks.get(p['status'], p['status'])}"
        + (f" ({p['note']})" if p.get("note") else "")
        for p in progress
    )


async def follow(
    session: Session,
    changes: asyncio.Queue[dict[str, Any]],
    message_id: str,
    screen: Screen,
    ask: Ask | None,
    shown: str = "",
) -> dict[str, Any]:
    """Show the background job's progress until its message ends; the final row. Drafts no
    longer than the `shown` text are the quick path's, already on the screen."""
    seq, progress, asked = 0, "", set()
    screen.line("")  # the streamed text ends its line; progress goes under it
    screen.set_status("continuing in the background")
    while True:
        change = await changes.get()
        row = change["new"]
        if change["table"] == "message_draft" and str(row["message_id"]) == message_id:
            if row["seq"] > seq and len(row["draft_content"]) > len(shown):
                seq = row["seq"]
                screen.set_status(f"writing ({len(row['draft_content'])} characters so far)")
            continue
        if change["table"] != "message" or str(row["id"]) != message_id:
            continue
        if row["status"] in FINAL_STATUSES:
            final: dict[str, Any] = row
            return final
        if (now := progress_text(row)) and now != progress:
            progress = now
            screen.set_status(progress)
        pending = (row.get("metadata") or {}).get("pendingApproval")
        if row["status"] == "awaiting_approval" and pending and pending["toolCallId"] not in asked:
            asked.add(pending["toolCallId"])
            await decide(session, pending, screen, ask)


async def decide(
    session: Session, pending: dict[str, Any], screen: Screen, ask: Ask | None
) -> None:
    name = visible(str(pending.get("name", "a tool")))
    # The server's `display` escapes what could hide or reorder text, or move the cursor; a
    # question asked before it had one is escaped here the same way.
    shown = pending.get("display") or display_arguments(pending.get("args", {}))
    shown = visible(str(shown), keep="\n")
    arguments = "\n".join(f"    {line}" for line in shown.splitlines())
    if ask is None:
        screen.line(f"waiting for approval of {name}, with\n{arguments}")
        screen.line(f"answer it at {session.origin}/")
        return
    status, screen.status = screen.status, ""  # no spinner over the prompt
    screen.write("")
    approved = await ask(f"Run {name}, with\n{arguments}\nApprove? [y/N] ")
    screen.status = status
    path = f"/api/chat/{session.chat_id}/approvals/{pending['toolCallId']}"
    response = await session.post(path, {"approved": approved})
    if not response.is_success:
        screen.line(f"(approval not recorded: {error_text(response)})")


async def chat(
    origin: str, content: str, chat_id: UUID | None, screen: Screen, ask: Ask | None
) -> int:
    """One turn; the exit status (0 when the answer completed)."""
    timeout = httpx.Timeout(30, read=None)  # streams stay quiet while tools run
    async with httpx.AsyncClient(base_url=origin, timeout=timeout) as http:
        try:
            session = await Session.open(http, chat_id)
            async with message_changes(session, screen) as changes:
                shown, handed_off = await stream_turn(session, content, screen)
                if handed_off is None:
                    screen.line("")
                    return 0
                try:
                    final = await follow(session, changes, handed_off, screen, ask, shown)
                except asyncio.CancelledError:
                    # Ctrl-C: the background job stops too, not only this terminal.
                    await asyncio.shield(session.post(f"/api/chat/{session.chat_id}/cancel", {}))
                    screen.line("\n[canceled]")
                    raise
        except ChatFailed as exc:
            screen.line("")
            print(f"handoff chat: {exc}", file=sys.stderr)
            return 1
    text = final["content"]
    screen.line(text[len(shown) :].lstrip("\n") if text.startswith(shown) else text)
    if final["status"] != "completed":
        screen.line(f"[{final['status']}]")
    return 0 if final["status"] == "completed" else 1


async def spinning(screen: Screen, work: Awaitable[int]) -> int:
    async def spin() -> None:
        while True:
            screen.tick()
            await asyncio.sleep(0.1)

    spinner = asyncio.create_task(spin())
    try:
        return await work
    finally:
        spinner.cancel()
        screen.write("")


async def ask_terminal(question: str) -> bool:
    answer = await asyncio.to_thread(input, question)
    return answer.strip().lower() in ("y", "yes")


def run(origin: str, content: str, chat_id: UUID | None) -> int:
    screen = Screen(sys.stdout, animated=sys.stdout.isatty())
    ask = ask_terminal if sys.stdin.isatty() else None
    try:
        return asyncio.run(spinning(screen, chat(origin, content, chat_id, screen, ask)))
    except KeyboardInterrupt:
        return 130
