"""What `handoff dev` prints once it serves: where, and how to talk to it.

The examples are the default assistant's conversation starters (`Assistant.starters`), so the
banner shows what the assistants in use can do; without starters, a plain greeting.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Sequence

from infra.store.ids import ChatId


def print_ready(
    origin: str, token: str, engine: str, *, email: str, chat_id: ChatId, starters: Sequence[str]
) -> None:
    first = starters[0] if starters else "hello"
    second = starters[1] if len(starters) > 1 else first
    body = f'{{"chatId": "{chat_id}", "content": {json.dumps(first)}}}'
    auth = '-H "Authorization: Bearer $TOKEN"'
    lines = [
        f"\nHandoff is running at {origin} (background work: {engine}).",
        f"Chat page: {origin}/ (as someone else, for a shared chat: {origin}/?as=bob@example.com)",
        f"In a terminal: uv run handoff chat --url {origin} {shlex.quote(second)}",
        f"Demo user {email}, chat {chat_id}. With curl:\n",
        f"TOKEN={shlex.quote(token)}",
        f"curl -N -X POST {origin}/api/chat/respond {auth} \\",
        f"  -H 'Content-Type: application/json' -d {shlex.quote(body)}\n",
        "When the turn needs a tool, the stream ends with `event: handoff` and the answer is"
        " written in the background: it appears in the chat's history (as on the chat page and"
        " in `uv run handoff chat`):\n",
        f"curl {auth} {origin}/api/chat/{chat_id}/history\n",
        "Stop with Ctrl-C.",
    ]
    # After SIGHUP the terminal may be gone: nothing to print to is no reason to fail.
    with contextlib.suppress(OSError):
        print("\n".join(lines), flush=True)
