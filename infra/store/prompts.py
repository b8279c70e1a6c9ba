"""What a background job puts to the user and waits for, kept on the assistant message.

Two kinds share one shape: a tool call waiting for approval (infra/store/approvals.py) and a
question the model asked (infra/store/questions.py). While one waits, the message has the kind's
status (`awaiting_approval`, `awaiting_input`) and the prompt in `metadata.<pending key>`
(`pendingApproval`, `pendingQuestion`), which is what a Realtime subscriber renders. The user's
reply is recorded in `metadata.<record key>[<id>]` (`approvals`, `answers`) before the event
wakes the function, so the event is only a signal: a reply whose event came too early for the
wait (or was lost) is still found, and an event cannot carry a reply the owner did not record.

In a shared chat, every member sees the prompt, but only the person whose message started the
turn (the job's sender) may reply to it: they asked for the tool's work, and the turn counts
against their limits. Anyone else gets NotTurnStarter (403). The reply is recorded as the
service, once the prompt is found under the caller's RLS: the Data API roles write no messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from psycopg.types.json import Jsonb

from infra.db import Conn
from infra.store.ids import ChatId, MessageId
from infra.store.statuses import WRITING_REPLY_STATUSES, with_statuses

ASK_SQL = with_statuses(
    """
update public.message
set status = %(status)s::text,
    metadata = metadata || jsonb_build_object(%(pending_key)s::text, %(pending)s::jsonb),
    updated_at = now()
where id = %(message_id)s and status in ({writing})
  and not (coalesce(metadata -> %(record_key)s::text, '{{}}'::jsonb) ? %(id)s::text)
returning id
""",
    writing=WRITING_REPLY_STATUSES,
)
REPLY_SQL = """
select metadata -> %(record_key)s::text -> %(id)s::text as reply from public.message
where id = %(message_id)s
"""
# Under the user's RLS: the prompt must be the one their chat's message is waiting on.
PENDING_SQL = """
select id, coalesce(metadata -> %(record_key)s::text, '{}'::jsonb) ? %(id)s::text as replied
from public.message
where chat_id = %(chat_id)s and status = %(status)s::text
  and metadata -> %(pending_key)s::text ->> %(id_key)s::text = %(id)s::text
"""
RECORD_SQL = """
update public.message
set metadata = metadata || jsonb_build_object(
      %(record_key)s::text,
      coalesce(metadata -> %(record_key)s::text, '{}'::jsonb)
        || jsonb_build_object(%(id)s::text, %(reply)s::jsonb)),
    updated_at = now()
where id = %(message_id)s and status = %(status)s::text
  and not (coalesce(metadata -> %(record_key)s::text, '{}'::jsonb) ? %(id)s::text)
returning id
"""
# Whether the prompt still waits for the user: open, not replied to, not past its expiresAt.
WAITING_SQL = """
select 1 from public.message
where id = %(message_id)s and status = %(status)s::text
  and metadata -> %(pending_key)s::text ->> %(id_key)s::text = %(id)s::text
  and not (coalesce(metadata -> %(record_key)s::text, '{}'::jsonb) ? %(id)s::text)
  and coalesce((metadata -> %(pending_key)s::text ->> 'expiresAt')::timestamptz > now(), true)
"""
# Whose turn the message answers: its job's sender, else the sender of the message it replies
# to, else the chat's owner.
STARTER_SQL = """
select coalesce(
  (select j.sender_id from public.job_runs j where j.root_message_id = m.id
   order by j.created_at desc limit 1),
  p.sender_id, c.user_id) as sender_id
from public.message m join public.chat c on c.id = m.chat_id
left join public.message p on p.id = m.parent_message_id
where m.id = %(message_id)s
"""
SETTLE_SQL = """
update public.message
set status = 'streaming', metadata = metadata - %(pending_key)s::text, updated_at = now()
where id = %(message_id)s and status = %(status)s::text
"""


class NotTurnStarter(PermissionError):
    """Someone other than the person whose message started the turn replied to its prompt."""


async def require_starter(conn: Conn, message_id: MessageId, user_id: str) -> None:
    """NotTurnStarter unless `user_id` started the turn the message answers; as the service."""
    row = await (await conn.execute(STARTER_SQL, {"message_id": message_id})).fetchone()
    if row is None or str(row["sender_id"]) != user_id:
        raise NotTurnStarter(message_id)


# The shape of an open prompt (`metadata.<pending key>`) and of the user's reply to it.
Pending = TypeVar("Pending", bound=Mapping[str, Any])
Reply = TypeVar("Reply", bound=Mapping[str, Any])


@dataclass(frozen=True)
class PromptKind(Generic[Pending, Reply]):
    """Where one kind of prompt lives on the message."""

    status: str  # the message's status while it waits
    pending_key: str  # metadata key of the open prompt
    id_key: str  # the prompt's id within it
    record_key: str  # metadata key of the user's replies, by prompt id

    def _params(self, message_id: MessageId | None, prompt_id: str) -> dict[str, object]:
        return {
            "status": self.status,
            "pending_key": self.pending_key,
            "id_key": self.id_key,
            "record_key": self.record_key,
            "message_id": message_id,
            "id": prompt_id,
        }

    async def ask(self, conn: Conn, message_id: MessageId, pending: Pending) -> bool:
        """Put the prompt to the user; False when it was replied to already (a replayed job)."""
        params = {**self._params(message_id, pending[self.id_key]), "pending": Jsonb(pending)}
        return await (await conn.execute(ASK_SQL, params)).fetchone() is not None

    async def reply(self, conn: Conn, message_id: MessageId, prompt_id: str) -> Reply | None:
        """The recorded reply, or None."""
        row = await (await conn.execute(REPLY_SQL, self._params(message_id, prompt_id))).fetchone()
        reply: Reply | None = row["reply"] if row else None
        return reply

    async def waiting(self, conn: Conn, message_id: MessageId, prompt_id: str) -> bool:
        """Whether the prompt is open, without the user's reply, and not past its time."""
        params = self._params(message_id, prompt_id)
        return await (await conn.execute(WAITING_SQL, params)).fetchone() is not None

    async def settle(
        self, conn: Conn, message_id: MessageId, prompt_id: str, fallback: Reply
    ) -> Reply:
        """Record `fallback` unless the user's reply is there, close the prompt; the reply."""
        params = {**self._params(message_id, prompt_id), "reply": Jsonb(fallback)}
        await conn.execute(RECORD_SQL, params)
        await conn.execute(SETTLE_SQL, params)
        return await self.reply(conn, message_id, prompt_id) or fallback

    async def pending_in(
        self, conn: Conn, chat_id: ChatId, prompt_id: str
    ) -> tuple[MessageId, bool] | None:
        """The message of `chat_id` waiting on `prompt_id`, and whether it has a reply; None
        when none waits. Run under the user's RLS, it sees only their chats."""
        params = {**self._params(None, prompt_id), "chat_id": chat_id}
        row = await (await conn.execute(PENDING_SQL, params)).fetchone()
        return None if row is None else (MessageId(row["id"]), bool(row["replied"]))

    async def record(self, conn: Conn, message_id: MessageId, prompt_id: str, reply: Reply) -> bool:
        """The user's reply, unless there is one already (False)."""
        params = {**self._params(message_id, prompt_id), "reply": Jsonb(reply)}
        return await (await conn.execute(RECORD_SQL, params)).fetchone() is not None
