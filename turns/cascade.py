"""An edit's cascade: the replies that depend on what the edit replaced, regenerated in chat
order, each as a background turn, one at a time (each one's new text is context for the next).

What a reply depends on is recorded when its turn opens (infra/store/sources.py): the message
that started it and the public messages it heard. The dependents of an edit are the replies that
heard the edited message or one of the replies the edit replaced, then those that heard them, and
so on, that no edit or regeneration replaced yet. Each is regenerated hearing what its original
heard, every message by its latest replacement (`Turn.context`), given in the same order.

Threads: regenerating a reply forks its assistant's thread from where its turn began, as a
regenerate does, and makes that branch active. A later dependent of a thread the edit or this
cascade already forked cannot fork from its own start, which lies on the branch left behind:
it continues the thread's active branch instead, from its head, and its user message moves onto
that branch with it (its `checkpointId` and `branchId`, as a new turn's). A later reply of such a
thread that depends on nothing replaced stays where it was, off the active branch (stale), as an
edit leaves it today.

Each step body here is idempotent, as a retried or replayed step runs it again: a dependent's
reply, job and run ids derive from the cascade and the reply it replaces, so a second start
finds the first. The cascade's row (infra/store/cascades.py) says whether to go on: canceled,
superseded or declined, nothing more starts.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Literal, TypedDict

from agent.assistants import Assistants
from agent.threads import thread_key
from infra.db import Conn
from infra.events import (
    CASCADE_CANCEL_EVENT,
    CascadeData,
    EventSender,
    send_cascade,
    send_control,
)
from infra.runtime import Services
from infra.store import cascades, sources
from infra.store.assistants import chat_route
from infra.store.forks import Edit, has_checkpoint
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.statuses import ENDED_REPLY_STATUSES
from turns.endings import Next, send_next
from turns.start import start_regeneration
from turns.streaming import TurnHost, new_turn
from turns.turn import Turn

logger = logging.getLogger(__name__)


class Planned(TypedDict):
    """A dependent to regenerate, as the plan step's output (memoized: keys stay)."""

    replyId: str
    assistantId: str
    mode: Literal["fork", "continue"]


class Started(TypedDict):
    """A regeneration step's output: the new reply (None: nothing started), and whether the
    cascade stops (canceled, superseded, or its chat gone)."""

    replyId: str | None
    stop: bool


EDIT_REPLIES_SQL = """
select id, assistant_id from public.message
where parent_message_id = %(message_id)s and role = 'assistant' and chat_id = %(chat_id)s
order by created_at, id
"""
STATUS_SQL = "select status from public.message where id = %(id)s"
PARENT_SQL = "select assistant_id from public.message where id = %(id)s"
DECLINE_SQL = """
update public.message
set metadata = metadata || jsonb_build_object('cascade', %(why)s::text), updated_at = now()
where id = any(%(ids)s) and not metadata ? 'replacedBy'
"""


@dataclass(frozen=True)
class Cascade:
    """The cascade `cascade_id` of chat `chat_id`, as its function's steps run it."""

    services: Services
    assistants: Assistants
    events: EventSender
    cascade_id: uuid.UUID
    chat_id: ChatId

    async def _row(self, conn: Conn, *, lock: bool = False) -> cascades.CascadeRow | None:
        return await cascades.get(conn, self.cascade_id, lock=lock)

    async def edit_replies(self) -> list[str]:
        """The replies the edit's own turns started (each a fork the edit made)."""
        async with (await self.services.pool()).connection() as conn:
            row = await self._row(conn)
            if row is None:
                return []
            params = {"message_id": row.replacement_id, "chat_id": self.chat_id}
            rows = await (await conn.execute(EDIT_REPLIES_SQL, params)).fetchall()
        return [str(r["id"]) for r in rows]

    async def ended(self, reply_id: str) -> bool:
        """Whether the reply's turn is over (or the reply gone)."""
        async with (await self.services.pool()).connection() as conn:
            row = await (await conn.execute(STATUS_SQL, {"id": reply_id})).fetchone()
        return row is None or row["status"] in ENDED_REPLY_STATUSES

    async def running(self, reply_id: str) -> bool:
        return not await self.ended(reply_id)

    async def plan(self) -> list[Planned]:
        """The dependents, in chat order, each with how it is regenerated: `fork` its thread
        from where its turn began, or `continue` the active branch of a thread this edit or
        cascade forked already."""
        async with (await self.services.pool()).connection() as conn:
            row = await self._row(conn)
            if row is None:
                return []
            old = await conn.execute(
                EDIT_REPLIES_SQL, {"message_id": row.edited_message_id, "chat_id": self.chat_id}
            )
            replaced = [MessageId(r["id"]) for r in await old.fetchall()]
            new = await conn.execute(
                EDIT_REPLIES_SQL, {"message_id": row.replacement_id, "chat_id": self.chat_id}
            )
            forked = {str(r["assistant_id"]) for r in await new.fetchall()}
            found = await sources.dependents(conn, self.chat_id, [row.edited_message_id, *replaced])
        planned: list[Planned] = []
        for dep in found:
            mode: Literal["fork", "continue"] = "continue" if dep.assistant_id in forked else "fork"
            forked.add(dep.assistant_id)
            planned.append({"replyId": str(dep.id), "assistantId": dep.assistant_id, "mode": mode})
        return planned

    async def regenerate(self, planned: Planned) -> Started:
        """Start the dependent's new turn, `queued` for the background (or waiting behind its
        assistant's job); once, however often this runs."""
        pool = await self.services.pool()
        old = MessageId(uuid.UUID(planned["replyId"]))
        new_id = MessageId(uuid.uuid5(self.cascade_id, f"reply:{old}"))
        assistant = self.assistants.get(planned["assistantId"])
        async with pool.connection() as conn, conn.transaction():
            row = await self._row(conn, lock=True)
            if row is None or row.status != "running":
                return {"replyId": None, "stop": True}
            if (await (await conn.execute(STATUS_SQL, {"id": new_id})).fetchone()) is not None:
                return {"replyId": str(new_id), "stop": False}
            chat = await chat_route(conn, self.chat_id, row.user_id, self.assistants.default.id)
            if chat is None:
                # The editor left the chat (or it is gone): their turns stop here.
                await cascades.set_status(conn, self.cascade_id, "canceled", was=("running",))
                return {"replyId": None, "stop": True}
            present = {a.assistant_id for a in chat.assistants}
            turn = None
            if assistant is not None and assistant.id in present:
                names = {a.id: a.name for a in self.assistants}
                turn = await self._turn(conn, row, old, planned, names)
            if turn is None:
                # Gone, its assistant no longer in the chat, or stored before turns recorded
                # where they began: left as it is.
                return {"replyId": None, "stop": False}
            await start_regeneration(conn, turn, self.services.settings.turn_lease_s)
            await cascades.count_regenerated(conn, self.cascade_id)
        await send_next(pool, Next(self.events, self.chat_id, turn.assistant_id))
        return {"replyId": str(new_id), "stop": False}

    async def _turn(
        self,
        conn: Conn,
        row: cascades.CascadeRow,
        old: MessageId,
        planned: Planned,
        names: dict[str, str],
    ) -> Turn | None:
        """The dependent's new turn: its message, what it hears, and the fork or the branch it
        continues; None when the reply cannot be regenerated."""
        dep = await sources.reply(conn, self.chat_id, old)
        assistant = self.assistants.get(planned["assistantId"])
        if dep is None or assistant is None:
            return None
        edit = None
        if planned["mode"] == "fork":
            if not dep.recorded_base:
                return None
            base = dep.base_checkpoint_id
            thread = thread_key(self.chat_id, assistant.id)
            if base is not None and not await has_checkpoint(conn, thread, base):
                return None
            edit = Edit(dep.parent_message_id, base, old, regenerate=True)
        parent = await (await conn.execute(PARENT_SQL, {"id": dep.parent_message_id})).fetchone()
        turn = new_turn(
            self.services.settings,
            assistant,
            user_id=row.user_id,
            chat_id=self.chat_id,
            content="",
            user_message_id=dep.parent_message_id,
            edit=edit,
            assistant_names=names,
            owns_message=parent is not None and parent["assistant_id"] == assistant.id,
        )
        job_key = str(uuid.uuid5(self.cascade_id, f"job:{old}"))
        return turn.model_copy(
            update={
                "reply_id": MessageId(uuid.uuid5(self.cascade_id, f"reply:{old}")),
                "job_key": job_key,
                "run_id": job_key,
                "content": None,
                "context": await sources.context_now(conn, old),
                "replaces": old,
            }
        )

    async def ask_more(self, remaining: int) -> bool:
        """The card: `remaining` replies still depend on the edit. False: the cascade stopped."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            return await cascades.ask(conn, self.cascade_id, remaining)

    async def awaits_decision(self) -> bool:
        async with (await self.services.pool()).connection() as conn:
            row = await self._row(conn)
        return row is not None and row.status == "awaiting_approval" and row.decision is None

    async def settle_more(self, remaining: list[str]) -> bool:
        """After the card's wait: approved, the cascade goes on; declined or unanswered, the
        remaining dependents stay as they are, marked `metadata.cascade = 'declined'`."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            row = await self._row(conn, lock=True)
            if row is None or row.status != "awaiting_approval":
                return False
            if row.decision == "approved":
                return await cascades.set_status(
                    conn, self.cascade_id, "running", was=("awaiting_approval",)
                )
            await cascades.set_status(conn, self.cascade_id, "declined", was=("awaiting_approval",))
            params = {"ids": [uuid.UUID(r) for r in remaining], "why": "declined"}
            await conn.execute(DECLINE_SQL, params)
        return False

    async def finish(self) -> bool:
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            return await cascades.set_status(conn, self.cascade_id, "completed", was=("running",))


def request_later(
    host: TurnHost, *, chat_id: ChatId, user_id: UserId, edited: MessageId, replacement: MessageId
) -> None:
    """After an edit's own turns started (`edited` replaced by `replacement`): its cascade,
    stored and sent detached from the response, so the edit's first token does not wait for it
    (the process's shutdown waits for it as for a turn)."""
    task = asyncio.create_task(_request(host, chat_id, user_id, edited, replacement))
    host.turns.add(task)
    task.add_done_callback(host.turns.discard)


async def _request(
    host: TurnHost, chat_id: ChatId, user_id: UserId, edited: MessageId, replacement: MessageId
) -> None:
    """Store the cascade, superseding the chat's open ones (each told to stop), and send its
    event; a failed send leaves it to the outbox relay."""
    pool = await host.services.pool()
    async with pool.connection() as conn, conn.transaction():
        cascade_id, superseded = await cascades.request(
            conn, chat_id=chat_id, user_id=user_id, edited=edited, replacement=replacement
        )
    for old in superseded:
        data = CascadeData(chatId=str(chat_id), cascadeId=str(old))
        await send_control(host.events, CASCADE_CANCEL_EVENT, data)
    try:
        await send_cascade(host.events, chat_id=chat_id, cascade_id=cascade_id)
        await cascades.mark_sent(pool, [cascade_id])
    except Exception:
        logger.exception("cascade not sent; left for the relay", extra={"chat_id": str(chat_id)})
