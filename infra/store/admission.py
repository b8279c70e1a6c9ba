"""A user's message, admitted, and its turn started: `handoff.start_turn` (migration 0025), in
one statement, as the service.

In order, each refusal rolling back all of it (nothing of the request is stored, its time in
the limit included):

- the sender's turns per minute (infra/store/limits.py), which takes their row of
  `handoff.user_limits`: the user's other requests wait until this transaction ends;
- their daily token budget, when one is set (`MAX_USER_DAILY_TOKENS`);
- the chat's job slot (infra/store/slots.py), for a turn: taken, or found taken;
- the message goes in only if the sender owns the chat or is a member of it (checked in the
  same statement as the insert, so a member removed meanwhile sends nothing), and only while
  their turns that have not ended (jobs whose `sender_id` is theirs, in any chat, and their
  turns still running though their job was deleted, infra/store/erased_turns.py) leave room
  for the replies it starts, one per assistant it addresses, within `max_active`. This turn's
  own job is not counted, nor the active jobs of the slots a message that interrupts cancels
  or joins (`replaced`: those assistants');
- the reply, `streaming`, when the slot was free.

The Data API roles may not write messages (migration 0022): a member could otherwise rewrite
another's.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from psycopg import DatabaseError, errors
from psycopg.types.json import Jsonb

from infra.db import Conn
from infra.store.assistants import ChatRoute, route_of
from infra.store.chats import ChatNotFound, UnknownUser
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.limits import (
    ACTIVE_TURNS_RETRY_S,
    WINDOW_S,
    TokenBudgetSpent,
    TooManyActiveTurns,
    TooManyTurns,
    TurnLimits,
)
from infra.store.messages import MessageMetadata

# The `assistant_id` of a message posted to a shared chat that names no assistant: every
# assistant of the chat hears it at its next turn (infra/store/public_messages.py), none answers.
TO_CHAT = ""

START_TURN_SQL = """
select handoff.start_turn(
  %(chat_id)s, %(user_id)s, %(assistant_id)s, %(message_id)s, %(content)s, %(metadata)s,
  %(stored)s, %(turns)s, %(replies)s, %(replaced)s::text[], %(per_minute)s, %(window_s)s,
  %(max_active)s, %(daily_tokens)s::bigint, %(lease_s)s, %(job_lease_s)s, %(job_key)s,
  %(run_id)s, %(event)s, %(reply_id)s::uuid, %(reply_metadata)s, %(slot_taken_aborts)s
) as took
"""


OPEN_TURN_SQL = """
select * from handoff.open_turn(
  %(expect)s, %(fallback)s, %(thread_id)s, %(chat_id)s, %(user_id)s, %(assistant_id)s,
  %(message_id)s, %(content)s, %(metadata)s, %(turns)s, %(replies)s, %(replaced)s::text[],
  %(per_minute)s, %(window_s)s, %(max_active)s, %(daily_tokens)s::bigint, %(lease_s)s,
  %(job_lease_s)s, %(job_key)s, %(run_id)s, %(event)s, %(reply_id)s::uuid, %(reply_metadata)s
)
"""
# How the chat must confirm the assistant the request most likely goes to: one it names must
# take part in the chat; the deployment's default, when it names none, must be the chat's
# default in a chat not shared.
Expect = Literal["named", "default"]


class DuplicateMessage(RuntimeError):
    """A message with this id already exists."""


class SlotTaken(RuntimeError):
    """The chat's slot is taken, and the caller asked to be told: nothing was stored."""


@dataclass(frozen=True)
class Admission:
    """A message to admit: a turn's when `reply_id` is set (its job takes the slot under
    `job_key`, which the active-turn count leaves out), else a post to the chat."""

    chat_id: ChatId
    user_id: UserId
    assistant_id: str
    message_id: MessageId
    content: str
    metadata: MessageMetadata
    limits: TurnLimits
    addressees: int = 1  # the replies it starts (0 for a post), each a turn per minute
    replaced: Sequence[str] = ()
    stored: bool = False  # the message exists already (a reply asked for again)
    job_key: str = ""
    run_id: str | None = None
    event: str | None = None
    reply_id: MessageId | None = None
    reply_metadata: MessageMetadata | None = None


@dataclass(frozen=True)
class Opened:
    """What `open_turn` found: the chat's route (None: not the sender's chat, or no such
    sender: a start refuses it); whether the turn started, or found the chat's slot taken with
    nothing stored; and, started, the head it continues, as `handoff.active_checkpoint`'s row."""

    route: ChatRoute | None
    started: bool
    slot_taken: bool
    head: dict[str, Any] | None


async def start(conn: Conn, admission: Admission, *, slot_taken_aborts: bool = False) -> bool:
    """Admit the message and start its turn (see the module); True when the turn took the
    chat's slot and its reply is stored, `streaming`. SlotTaken, with nothing stored, when
    the slot is taken and `slot_taken_aborts`.

    Refusals: TooManyTurns, TokenBudgetSpent, TooManyActiveTurns, ChatNotFound (neither the
    sender's chat nor one they are a member of), DuplicateMessage (a retried send), UnknownUser
    (no such user)."""
    params = {
        **_params(admission),
        "stored": admission.stored,
        "slot_taken_aborts": slot_taken_aborts,
    }
    async with _refusals(admission):
        row = await (await conn.execute(START_TURN_SQL, params)).fetchone()
    assert row is not None
    return bool(row["took"])


async def open_turn(
    conn: Conn, admission: Admission, *, expect: Expect, fallback: str, thread_id: str
) -> Opened:
    """The chat's route and, when it confirms `expect` of the admission's assistant, the turn
    started as `start` starts it (`slot_taken_aborts`), with the head it continues
    (`handoff.open_turn`, migration 0027). `fallback`: the deployment's default assistant.
    Refusals as `start`'s."""
    params = {**_params(admission), "expect": expect, "fallback": fallback, "thread_id": thread_id}
    async with _refusals(admission), conn.cursor() as cur:
        await cur.execute(OPEN_TURN_SQL, params, binary=True)
        row = await cur.fetchone()
    assert row is not None
    route = route_of(row, fallback) if row["visible"] else None
    return Opened(route, row["started"], row["slot_taken"], row if row["started"] else None)


def _params(a: Admission) -> dict[str, Any]:
    return {
        "chat_id": a.chat_id,
        "user_id": a.user_id,
        "assistant_id": a.assistant_id,
        "message_id": a.message_id,
        "content": a.content,
        "metadata": Jsonb(a.metadata),
        "turns": max(a.addressees, 1),
        "replies": a.addressees,
        "replaced": list(a.replaced),
        "per_minute": a.limits.per_minute,
        "window_s": WINDOW_S,
        "max_active": a.limits.max_active,
        "daily_tokens": a.limits.daily_tokens,
        "lease_s": a.limits.lease_s,
        "job_lease_s": a.limits.job_lease_s,
        "job_key": a.job_key,
        "run_id": a.run_id,
        "event": a.event,
        "reply_id": a.reply_id,
        "reply_metadata": Jsonb(a.reply_metadata or {}),
    }


@asynccontextmanager
async def _refusals(admission: Admission) -> AsyncIterator[None]:
    """A refusal of `handoff.start_turn` raised as what it means."""
    try:
        yield
    except errors.ForeignKeyViolation as exc:
        raise UnknownUser from exc
    except DatabaseError as exc:
        refusal = _refusal(exc, admission)
        if refusal is None:
            raise
        raise refusal from exc


def _refusal(exc: DatabaseError, admission: Admission) -> Exception | None:
    """What a refusal of `handoff.start_turn` (SQLSTATE class HF) means; None for any other
    error."""
    code = exc.sqlstate or ""
    wait = exc.diag.message_detail
    retry_after_s = max(1, math.ceil(float(wait))) if wait else 1
    refusals: dict[str, Exception] = {
        "HF001": TooManyTurns(retry_after_s),
        "HF002": TokenBudgetSpent(retry_after_s),
        "HF003": TooManyActiveTurns(ACTIVE_TURNS_RETRY_S),
        "HF004": ChatNotFound(admission.chat_id),
        "HF005": DuplicateMessage(admission.message_id),
        "HF006": SlotTaken(admission.chat_id),
    }
    return refusals.get(code)
