"""`handoff chat`: one turn in the terminal, against a running `handoff dev`.

Tokens print as they stream; once the turn hands off, a spinner shows the background job's
progress, followed as a frontend follows it: the chat's `message` and `message_draft` rows through
Supabase Realtime, with supabase-py's client (the dev server speaks Realtime's protocol); then the
final text prints. Where the server cannot follow the database (no logical decoding), or the
subscription is lost, it polls the history instead. A tool call that needs approval and a
question of the model are asked on the terminal when there is a keyboard to answer them;
otherwise it says where to answer. Everything the model or a tool wrote is printed with its
control, bidi and invisible characters escaped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TextIO
from uuid import UUID

import httpx
from httpx_sse import EventSource, aconnect_sse
from realtime import (
    RealtimeChannelOptions,
    RealtimePostgresChangesListenEvent,
    RealtimeSubscribeStates,
)
from realtime.types import PostgresChangesPayload
from supabase import AsyncClient, AsyncClientOptions, acreate_client

from agent.display import display_arguments, visible
from infra.store.statuses import ENDED_REPLY_STATUSES

FINAL_STATUSES = frozenset(ENDED_REPLY_STATUSES)
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
POLL_S = 0.5  # history polling, when the server cannot decode changes
SUBSCRIBE_TIMEOUT_S = 15
CANCEL_TIMEOUT_S = 5
# Leaving the channel and closing the socket, at the end: a server that stopped answering gets
# no longer than this.
LEAVE_TIMEOUT_S = 2
# Put on the changes queue when they can no longer be read: the server is gone.
SERVER_GONE: dict[str, Any] = {"table": None}

logger = logging.getLogger(__name__)

# Asks the user something (a tool approval, the model's question): the prompt, and the line
# they typed; None when there is nothing more to read.
Ask = Callable[[str], Awaitable[str | None]]


def printable(text: str) -> str:
    """Text from the model or a tool as the terminal may print it: line breaks and tabs kept,
    every other control, bidi or invisible character escaped (no cursor moves, no reordering)."""
    return visible(text, keep="\n\t")


class ChatFailed(Exception):
    """The turn could not run; the message says why, in the user's terms."""


def server_gone(origin: str) -> ChatFailed:
    return ChatFailed(
        f"the server at {origin} went away before the turn ended; once it is back, the chat"
        " page shows the answer"
    )


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
    token: str
    anon_key: str

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
        origin = str(http.base_url).rstrip("/")
        chat_id = str(chat or body["chatId"])
        return cls(http, headers, chat_id, origin, body["token"], body["anonKey"])

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post(path, json=body, headers=self.headers)

    def events(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> AbstractAsyncContextManager[EventSource]:
        # aconnect_sse adds its Accept header to the dict it is handed: give it a copy.
        extra = {"timeout": timeout} if timeout is not None else {}
        headers = dict(self.headers)
        return aconnect_sse(self.http, method, path, json=body, headers=headers, **extra)


@asynccontextmanager
async def message_changes(
    session: Session, screen: Screen
) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
    """Rows of `message` and `message_draft` as they change, from the moment this yields, each
    as `{"table", "eventType", "new"}`; SERVER_GONE once they cannot be read any more."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    ready: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    tasks: list[asyncio.Task[None]] = []
    polling = False

    def poll() -> None:
        nonlocal polling
        if not polling:
            polling = True
            tasks.append(asyncio.create_task(_poll_history(session, queue)))

    def on_change(payload: PostgresChangesPayload) -> None:
        data: Any = payload["data"]
        queue.put_nowait({"table": data["table"], "eventType": data["type"], "new": data["record"]})

    def on_system(payload: Any) -> None:
        # "Subscribed to PostgreSQL": from here on, no change is missed.
        if payload.extension == "postgres_changes" and not ready.done():
            ready.set_result(None)

    def on_state(state: RealtimeSubscribeStates, error: Exception | None) -> None:
        if state == RealtimeSubscribeStates.SUBSCRIBED:
            return
        # Refused, or lost (a system error: the server cannot decode changes, or dropped the
        # channel; or the socket closed): the history tells what happens next, or that the
        # server is gone.
        if not ready.done():
            ready.set_result(_reason(error) or state.value)
        else:
            logger.debug("realtime subscription lost: %s", _reason(error) or state.value)
            poll()

    # The socket is not reconnected: a lost subscription falls back to polling the history.
    options = AsyncClientOptions(realtime={"auto_reconnect": False})
    client = await acreate_client(session.origin, session.anon_key, options)
    try:
        await client.realtime.set_auth(session.token)  # the user's token: their RLS applies
        channel = client.channel(f"chat:{session.chat_id}", private_channel())
        for table in ("message", "message_draft"):
            channel.on_postgres_changes(
                RealtimePostgresChangesListenEvent.All,
                on_change,
                table=table,
                schema="public",
                filter=f"chat_id=eq.{session.chat_id}",
            )
        channel.on_system(on_system)
        try:
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT_S):
                await channel.subscribe(on_state)
                problem = await asyncio.shield(ready)
        except (OSError, TimeoutError) as exc:
            raise server_gone(session.origin) from exc
        except Exception as exc:  # the handshake refused (websockets' InvalidStatus, …)
            problem = str(exc)
        if problem is not None:
            screen.line(f"(live progress unavailable: {problem} Polling instead.)")
            poll()
        yield queue
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with suppress(asyncio.CancelledError):
                await task
        await _leave(client)


def private_channel() -> RealtimeChannelOptions:
    """supabase-py's defaults, private: the chat's channel is joined only when the policies on
    realtime.messages let the user read it. (A new dict each time: subscribing writes to it.)"""
    return {
        "config": {
            "broadcast": {"ack": False, "self": False},
            "presence": {"key": "", "enabled": False},
            "private": True,
        }
    }


def _reason(error: Exception | None) -> str | None:
    """What Realtime said: a system error's message (supabase-py passes its payload as JSON)."""
    if error is None:
        return None
    try:
        said = json.loads(str(error))
    except ValueError:
        return str(error)
    if isinstance(said, dict) and isinstance(said.get("message") or said.get("reason"), str):
        return str(said.get("message") or said.get("reason"))
    return str(error)


async def _leave(client: AsyncClient) -> None:
    try:
        async with asyncio.timeout(LEAVE_TIMEOUT_S):
            await client.remove_all_channels()
    except Exception as exc:  # a server gone or stopped: nothing to leave
        logger.debug("realtime leave failed", exc_info=exc)
        with suppress(Exception):
            await client.realtime.close()


async def _poll_history(session: Session, queue: asyncio.Queue[dict[str, Any]]) -> None:
    """The feed's `message` changes, read from the history endpoint instead."""
    path = f"/api/chat/{session.chat_id}/history"
    while True:
        try:
            response = await session.http.get(path, headers=session.headers)
        except httpx.TransportError:
            queue.put_nowait(SERVER_GONE)
            return
        for message in response.json().get("messages", []) if response.is_success else []:
            metadata = {
                "snapshot": {"progress": message.get("progress", [])},
                "pendingApproval": message.get("pendingApproval"),
                "pendingQuestion": message.get("pendingQuestion"),
            }
            row = {**message, "metadata": metadata}
            queue.put_nowait({"table": "message", "eventType": "UPDATE", "new": row})
        await asyncio.sleep(POLL_S)


async def stream_turn(session: Session, content: str, screen: Screen) -> tuple[str, str | None]:
    """Stream the quick path; the text shown, and the assistant message id if it handed off."""
    shown = ""
    body = {"chatId": session.chat_id, "content": content}
    try:
        async with session.events("POST", "/api/chat/respond", body) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise ChatFailed(error_text(source.response))
            async for sse in source.aiter_sse():
                event, data = sse.event, sse.json()
                if event == "token":
                    shown += data["text"]
                    screen.write(printable(data["text"]))
                elif event == "done":
                    return data["content"], None
                elif event == "handoff":
                    return shown, str(data["assistantMessageId"])
                elif event == "error":
                    raise ChatFailed(data["message"])
    except httpx.TransportError as exc:
        raise server_gone(session.origin) from exc
    raise ChatFailed("the server closed the stream before the turn ended")


def progress_text(row: dict[str, Any]) -> str:
    progress = (row.get("metadata") or {}).get("snapshot", {}).get("progress", [])
    marks = {"completed": "done", "error": "failed", "pending": "running"}
    return ", ".join(
        printable(f"{p['name']} {marks.get(p['status'], p['status'])}")
        + (f" ({printable(str(p['note']))})" if p.get("note") else "")
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
    seq, progress, asked, paused = 0, "", set(), ""
    screen.line("")  # the streamed text ends its line; progress goes under it
    screen.set_status("continuing in the background")
    while True:
        change = await changes.get()
        if change is SERVER_GONE:
            raise server_gone(session.origin)
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
        metadata = row.get("metadata") or {}
        pending = metadata.get("pendingApproval")
        if row["status"] == "awaiting_approval" and pending and pending["toolCallId"] not in asked:
            asked.add(pending["toolCallId"])
            await decide(session, pending, screen, ask)
        question = metadata.get("pendingQuestion")
        if row["status"] == "awaiting_input" and question and question["questionId"] not in asked:
            asked.add(question["questionId"])
            await answer(session, question, screen, ask)
        if row["status"] == "paused":
            paused = f"paused: resume it at {session.origin}/"
            screen.set_status(paused)
        elif paused and row["status"] == "streaming":
            paused = ""
            screen.set_status("resumed, continuing in the background")


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
    typed = await ask(f"Run {name}, with\n{arguments}\nApprove? [y/N] ")
    screen.status = status
    approved = (typed or "").strip().lower() in ("y", "yes")
    path = f"/api/chat/{session.chat_id}/approvals/{pending['toolCallId']}"
    response = await session.post(path, {"approved": approved})
    if not response.is_success:
        screen.line(f"(approval not recorded: {error_text(response)})")


async def answer(
    session: Session, question: dict[str, Any], screen: Screen, ask: Ask | None
) -> None:
    """Put the model's question to the user: its context, the question, numbered options. A
    number picks an option; any other text is the answer."""
    options = [printable(str(option)) for option in question.get("options") or []]
    lines = []
    if question.get("context"):
        lines.append(f"  ({printable(str(question['context']))})")
    lines.append(f"  {printable(str(question.get('question', '')))}")
    lines += [f"    {number}. {option}" for number, option in enumerate(options, 1)]
    asked = "\n".join(lines)
    if ask is None:
        screen.line(f"the assistant asks:\n{asked}")
        screen.line(f"answer it at {session.origin}/")
        return
    status, screen.status = screen.status, ""  # no spinner over the prompt
    screen.write("")
    screen.line(f"The assistant asks:\n{asked}")
    hint = f"1-{len(options)}, or your own words" if options else "your answer"
    reply = ""
    while not reply:
        typed = await ask(f"Answer ({hint}): ")
        if typed is None:  # nothing more to read: answer elsewhere
            screen.status = status
            screen.line(f"answer it at {session.origin}/")
            return
        reply = typed.strip()
    screen.status = status
    if reply.isdigit() and 1 <= int(reply) <= len(options):
        reply = str(question["options"][int(reply) - 1])
    path = f"/api/chat/{session.chat_id}/answers/{question['questionId']}"
    response = await session.post(path, {"answer": reply})
    if not response.is_success:
        screen.line(f"(answer not recorded: {error_text(response)})")


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
                    screen.line("\n" + await asyncio.shield(cancel_turn(session)))
                    raise
        except ChatFailed as exc:
            screen.line("")
            print(f"handoff chat: {exc}", file=sys.stderr)
            return 1
    text = final["content"]
    screen.line(printable(text[len(shown) :].lstrip("\n") if text.startswith(shown) else text))
    if final["status"] != "completed":
        screen.line(f"[{final['status']}]")
    return 0 if final["status"] == "completed" else 1


async def cancel_turn(session: Session) -> str:
    """Cancel the chat's turn; what to show for it."""
    try:
        async with asyncio.timeout(CANCEL_TIMEOUT_S):
            response = await session.post(f"/api/chat/{session.chat_id}/cancel", {})
    except (httpx.TransportError, TimeoutError):
        return f"[not canceled: the server at {session.origin} cannot be reached]"
    if not response.is_success:
        return f"[not canceled: {error_text(response)}]"
    return "[canceled]"


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


async def ask_terminal(prompt: str) -> str | None:
    try:
        return await asyncio.to_thread(input, prompt)
    except EOFError:
        return None


def run(origin: str, content: str, chat_id: UUID | None) -> int:
    # supabase-py's realtime client logs a lost socket as an error; here it is handled (the
    # history is polled, or the one line says the server went away), so not printed.
    logging.getLogger("realtime").addHandler(logging.NullHandler())
    logging.getLogger("realtime").propagate = False
    screen = Screen(sys.stdout, animated=sys.stdout.isatty())
    ask = ask_terminal if sys.stdin.isatty() else None
    try:
        return asyncio.run(spinning(screen, chat(origin, content, chat_id, screen, ask)))
    except KeyboardInterrupt:
        return 130
