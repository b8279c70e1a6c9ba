"""Context between assistants: at each turn, what the others said in the chat that this
assistant has not heard.

Each assistant keeps its own thread (its tool calls and reasoning, never another's). A turn in a
chat with several assistants begins with the chat's public messages (infra/store/public_messages.py)
its thread does not hold, in chat order, before the user's message: each a human message
attributed by name (`[Calculator] 42`, `[User] what is 6*7?`), whose id is the message row's,
so that once the turn is stored it is part of the thread and never given again. What a reply
heard is recorded as its sources (infra/store/sources.py); a regenerated dependent of an edit
hears its original's, each message by its latest replacement (`Turn.context`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from langchain_core.messages import AnyMessage, HumanMessage

from infra.db import Conn, Pool
from infra.store import public_messages, sources
from infra.store.ids import MessageId
from infra.store.public_messages import PublicMessage
from turns.turn import Turn

USER_NAME = "User"


async def unheard(pool: Pool, turn: Turn, thread: Sequence[AnyMessage]) -> list[HumanMessage]:
    """The public messages the turn's `thread` (its messages) has not seen, attributed; none,
    and no query, for a chat with one assistant."""
    in_thread = {m.id for m in thread}
    if turn.context is not None:
        # A regenerated dependent hears what its original heard, by the latest replacements.
        async with pool.connection() as conn:
            given = await public_messages.by_ids(conn, chat_id=turn.chat_id, ids=turn.context)
        return [attributed(m, turn.assistant_names) for m in given if str(m.id) not in in_thread]
    # Before the turn's message: an edit's, the message it replaces.
    before = turn.edit.message_id if turn.edit is not None else turn.user_message_id
    if not turn.assistant_names or before is None:
        return []
    async with pool.connection() as conn:
        public = await public_messages.not_by(
            conn, chat_id=turn.chat_id, assistant_id=turn.assistant_id, before=before
        )
    return [attributed(m, turn.assistant_names) for m in public if str(m.id) not in in_thread]


def attributed(message: PublicMessage, names: dict[str, str]) -> HumanMessage:
    """`message` as another voice of the chat: its author's name, then what they said."""
    author = USER_NAME if message.role == "user" else names.get(message.assistant_id)
    return HumanMessage(
        content=f"[{author or message.assistant_id}] {message.content}", id=str(message.id)
    )


async def record_sources(conn: Conn, turn: Turn, heard: Sequence[HumanMessage]) -> None:
    """What the opened turn's reply depends on (its message, what it heard), and what it
    replaces: an edit's message the edited one, a new reply the assistant's earlier replies to
    the same message (infra/store/sources.py)."""
    assert turn.user_message_id is not None
    chat_id, edit = turn.chat_id, turn.edit
    if edit is not None and not edit.regenerate and turn.owns_message:
        await sources.replace(conn, chat_id=chat_id, old=edit.message_id, new=turn.user_message_id)
    if edit is not None or turn.replaces is not None:
        await sources.replace_replies(
            conn,
            chat_id=chat_id,
            assistant_id=turn.assistant_id,
            message_id=edit.message_id if edit is not None else turn.user_message_id,
            new=turn.reply_id,
        )
    context = [MessageId(uuid.UUID(m.id)) for m in heard if m.id]
    await sources.record(
        conn, chat_id=chat_id, reply_id=turn.reply_id, started=turn.user_message_id, context=context
    )
