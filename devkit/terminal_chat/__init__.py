"""`handoff chat`: one turn in the terminal, against a running `handoff dev`.

The reply's assistant is named before its text (`--assistant ID` asks that one; without it,
the chat's default answers, or whom the message @-mentions: the first streams, and each other
one, which runs in the background after it, is followed to its end under its own name).
Tokens print as they stream; once the turn hands off, a spinner shows the background job's
progress, followed as a frontend follows it: the chat's `message` and `message_draft` rows
through Supabase Realtime, with supabase-py's client (the dev server speaks Realtime's
protocol); then the final text prints.
Where the server cannot follow the database (no logical decoding), or the subscription is lost,
it polls the history instead. A tool call that needs approval and a question of the model are
asked on the terminal when there is a keyboard to answer them; otherwise it says where to
answer. Everything the model or a tool wrote is printed with its control, bidi and invisible
characters escaped.

By concern: client.py speaks HTTP (the session and the assistants' names, the turn's SSE
stream, the control routes), subscription.py follows the chat's rows, background.py a reply in
the background and what it asks, transcript.py the chat as it stands (`--history`: senders,
stale messages and their replacements, an edit's cascade card), screen.py is what is printed;
this module is the command that joins them.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import httpx

from devkit.terminal_chat.background import Ask, Feed, follow
from devkit.terminal_chat.client import (
    ChatFailed,
    Reply,
    Session,
    Streamed,
    cancel_turn,
    stream_turn,
)
from devkit.terminal_chat.screen import Screen, printable
from devkit.terminal_chat.subscription import message_changes
from devkit.terminal_chat.transcript import show

POSTED = (
    "Posted to the chat for its people: in a shared chat, a message that names no assistant"
    " gets no reply (@-mention one, or pass --assistant ID)."
)


def shown_on(screen: Screen) -> Callable[[str], None]:
    """Streamed text onto the screen, escaped."""
    return lambda text: screen.write(printable(text))


def labelled(screen: Screen, session: Session) -> Callable[[str | None], None]:
    """The reply's assistant, by name, before its text."""
    return lambda assistant_id: screen.write(f"{printable(session.name_of(assistant_id))}: ")


def unavailable(screen: Screen) -> Callable[[str], None]:
    """What the screen says when the live progress gives way to polling."""
    return lambda problem: screen.line(f"(live progress unavailable: {problem} Polling instead.)")


async def chat(
    origin: str,
    content: str,
    chat_id: UUID | None,
    assistant_id: str | None,
    screen: Screen,
    ask: Ask | None,
    as_email: str | None = None,
) -> int:
    """One turn, and every reply it started (one per assistant the message @-mentions), each
    followed to its end under its assistant's name; the exit status (0 when all completed)."""
    timeout = httpx.Timeout(30, read=None)  # streams stay quiet while tools run
    async with httpx.AsyncClient(base_url=origin, timeout=timeout) as http:
        try:
            session = await Session.open(http, chat_id, assistant_id, as_email)
            async with message_changes(session, unavailable(screen)) as changes:
                feed = Feed(changes)
                streamed = await stream_turn(
                    session, content, shown_on(screen), labelled(screen, session)
                )
                if streamed.shown is None:
                    screen.line(POSTED)
                    return 0
                ended = [await first_reply(session, feed, streamed, screen, ask)]
                for other in streamed.others:
                    ended.append(await other_reply(session, feed, other, screen, ask))
        except ChatFailed as exc:
            screen.end_line()  # after text streamed before the failure, not on an empty screen
            print(f"handoff chat: {exc}", file=sys.stderr)
            return 1
    return 0 if all(status == "completed" for status in ended) else 1


async def first_reply(
    session: Session, feed: Feed, streamed: Streamed, screen: Screen, ask: Ask | None
) -> str:
    """The reply the quick path streamed, to its end (the rest of its text, once the background
    wrote it); its final status."""
    shown = streamed.shown or ""
    if streamed.handed_off is None:
        screen.line("")
        return "completed"
    final = await followed(
        session, feed, Reply(streamed.assistant_id, streamed.handed_off), screen, ask, shown=shown
    )
    text = final["content"]
    screen.line(printable(text[len(shown) :].lstrip("\n") if text.startswith(shown) else text))
    return final_status(screen, final)


async def other_reply(
    session: Session, feed: Feed, reply: Reply, screen: Screen, ask: Ask | None
) -> str:
    """Another assistant's reply to the message, which runs in the background after the first:
    under its name, its text once it ended (at once, if it has already); its final status."""
    name = printable(session.name_of(reply.assistant_id))
    final = feed.ended(reply.message_id)
    if final is None:
        screen.line(f"{name}:")
        final = await followed(session, feed, reply, screen, ask, status="waiting for its turn")
        screen.line(printable(final["content"]))
    else:
        screen.line(f"{name}: {printable(final['content'])}")
    return final_status(screen, final)


async def followed(
    session: Session, feed: Feed, reply: Reply, screen: Screen, ask: Ask | None, **how: str
) -> dict[str, Any]:
    """`reply` followed in the background to its final row; Ctrl-C cancels its turn."""
    try:
        return await follow(session, feed, reply.message_id, screen, ask, **how)
    except asyncio.CancelledError:
        # Ctrl-C: the background job stops too, not only this terminal.
        screen.line("\n" + await asyncio.shield(cancel_turn(session, reply.assistant_id)))
        raise


def final_status(screen: Screen, final: dict[str, Any]) -> str:
    """The reply's final status, said under it unless it completed."""
    if final["status"] != "completed":
        screen.line(f"[{final['status']}]")
    return str(final["status"])


async def history(
    origin: str, chat_id: UUID | None, screen: Screen, ask: Ask | None, as_email: str | None
) -> int:
    """`--history`: the chat as it stands, and the cascade cards waiting in it."""
    async with httpx.AsyncClient(base_url=origin, timeout=httpx.Timeout(30)) as http:
        try:
            return await show(await Session.open(http, chat_id, None, as_email), screen, ask)
        except ChatFailed as exc:
            print(f"handoff chat: {exc}", file=sys.stderr)
            return 1


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


def run(
    origin: str,
    content: str | None,
    chat_id: UUID | None,
    assistant_id: str | None = None,
    show_history: bool = False,
    as_email: str | None = None,
) -> int:
    # supabase-py's realtime client logs a lost socket as an error; here it is handled (the
    # history is polled, or the one line says the server went away), so not printed.
    logging.getLogger("realtime").addHandler(logging.NullHandler())
    logging.getLogger("realtime").propagate = False
    screen = Screen(sys.stdout, animated=sys.stdout.isatty())
    ask = ask_terminal if sys.stdin.isatty() else None
    try:
        if show_history:
            return asyncio.run(history(origin, chat_id, screen, ask, as_email))
        assert content is not None  # the command line asks for one without --history
        turn = chat(origin, content, chat_id, assistant_id, screen, ask, as_email)
        return asyncio.run(spinning(screen, turn))
    except KeyboardInterrupt:
        return 130
