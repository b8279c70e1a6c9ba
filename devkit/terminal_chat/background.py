"""Following a reply that continues in the background: its progress on the spinner line, and
what it asks of the user (a tool call to approve, the model's question), asked on the terminal
when there is a keyboard to answer; otherwise it says where to answer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent.display import display_arguments, visible
from devkit.terminal_chat.client import Session, server_gone
from devkit.terminal_chat.screen import Screen, printable, progress_text
from devkit.terminal_chat.subscription import SERVER_GONE
from infra.store.statuses import ENDED_REPLY_STATUSES

FINAL_STATUSES = frozenset(ENDED_REPLY_STATUSES)

# Asks the user something (a tool approval, the model's question): the prompt, and the line
# they typed; None when there is nothing more to read.
Ask = Callable[[str], Awaitable[str | None]]


@dataclass
class Feed:
    """The chat's changes as they come (`changes`), remembering each message's latest row: a
    reply followed after another may have changed, or ended, while the first was followed."""

    changes: asyncio.Queue[dict[str, Any]]
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def next(self) -> dict[str, Any]:
        change = await self.changes.get()
        if change is not SERVER_GONE and change["table"] == "message":
            self.latest[str(change["new"]["id"])] = change["new"]
        return change

    def ended(self, message_id: str) -> dict[str, Any] | None:
        """The message's final row, if it has ended already."""
        row = self.latest.get(message_id)
        return row if row is not None and row["status"] in FINAL_STATUSES else None


async def follow(
    session: Session,
    feed: Feed,
    message_id: str,
    screen: Screen,
    ask: Ask | None,
    shown: str = "",
    status: str = "continuing in the background",
) -> dict[str, Any]:
    """Show the background job's progress until its message ends; the final row. Drafts no
    longer than the `shown` text are the quick path's, already on the screen. `status`: what
    the spinner says until the job says more."""
    seq, progress, asked, paused = 0, "", set(), ""
    screen.end_line()  # the streamed text ends its line; progress goes under it
    screen.set_status(status)
    # What the feed said of the message already, then what it says next.
    known: list[dict[str, Any]] = []
    if message_id in feed.latest:
        known.append({"table": "message", "new": feed.latest[message_id]})
    while True:
        change = known.pop() if known else await feed.next()
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
    if (problem := await session.approve(pending["toolCallId"], approved)) is not None:
        screen.line(f"(approval not recorded: {problem})")


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
    if (problem := await session.answer(question["questionId"], reply)) is not None:
        screen.line(f"(answer not recorded: {problem})")
