"""`handoff chat --history`: the chat as it stands, then what waits for the user in it.

Each message prints under a short id (its first eight characters), a user message after its
sender ("You", or the member's e-mail in a shared chat), a reply after its assistant's name. A
message something replaced (an edit, a regenerate, an edit's cascade) stays, marked stale with
the short id of its replacement; the rest of an old branch is not printed. An edit's cascade
card (replies still depending on the edit) is asked on the terminal when there is a keyboard;
otherwise it says where to answer.
"""

from __future__ import annotations

from typing import Any

from devkit.terminal_chat.background import Ask
from devkit.terminal_chat.client import ChatFailed, Session, error_text
from devkit.terminal_chat.screen import Screen, printable


def short(message_id: str) -> str:
    return f"[{message_id[:8]}]"


def sender_names(session: Session, members: list[dict[str, Any]]) -> dict[str, str]:
    """Each member's name for their messages: "You" for the caller, else their e-mail."""
    names = {m["userId"]: printable(str(m.get("email") or m["userId"])) for m in members}
    names[session.user_id] = "You"
    return names


def message_line(session: Session, names: dict[str, str], message: dict[str, Any]) -> str:
    if message["role"] == "user":
        sender = message.get("senderId")
        who = names.get(sender, f"{sender[:8]}…") if sender else "You"
    else:
        who = printable(session.name_of(message["assistantId"]))
    text = printable(message["content"])
    line = f"{short(message['id'])} {who}: {text}"
    if message.get("stale") and message.get("replacedBy"):
        line += f"\n    (stale: replaced by {short(message['replacedBy'])})"
    elif message.get("cascade") == "declined":
        line += "\n    (kept as it was: the edit before it was not followed)"
    return line


async def cascade_card(
    session: Session, card: dict[str, Any], screen: Screen, ask: Ask | None
) -> None:
    remaining = card["remaining"]
    depend = "1 reply still depends" if remaining == 1 else f"{remaining} replies still depend"
    screen.line(f"{depend} on your edit ({card['regenerated']} regenerated so far).")
    if ask is None:
        screen.line(f"answer it at {session.origin}/")
        return
    typed = await ask("Regenerate them too? [y/N] ")
    approved = (typed or "").strip().lower() in ("y", "yes")
    path = f"/api/chat/{session.chat_id}/cascades/{card['id']}/decision"
    response = await session.post(path, {"approved": approved})
    if not response.is_success:
        screen.line(f"(decision not recorded: {error_text(response)})")
    else:
        screen.line("Regenerating them." if approved else "They stay as they are.")


async def show(session: Session, screen: Screen, ask: Ask | None) -> int:
    """Print the chat, then ask about each cascade card waiting; the exit status."""
    chat = f"/api/chat/{session.chat_id}/history?all=true"
    history = await session.http.get(chat, headers=session.headers)
    if not history.is_success:
        raise ChatFailed(error_text(history))
    members = await session.http.get(
        f"/api/chats/{session.chat_id}/members", headers=session.headers
    )
    names = sender_names(session, members.json()["members"] if members.is_success else [])
    body = history.json()
    for message in body["messages"]:
        if message["role"] not in ("user", "assistant"):
            continue
        if message.get("stale") and not message.get("replacedBy"):
            continue  # the rest of an old branch
        screen.line(message_line(session, names, message))
    for card in body.get("pendingCascades", []):
        await cascade_card(session, card, screen, ask)
    return 0
