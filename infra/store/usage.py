"""What replies used, per model, chat and user: `public.reply_usage` (migration 0014).

A row is the user's whose turn the reply answers (its job's sender, migration 0022): in a shared
chat, a member's turns count against the member, not the chat's owner.

Each reply has one row: its model, the input and output tokens of its turn's model calls and
the tool calls that were answered. `record` writes it in the transaction that stores the same
figures on the reply (`metadata.usage`, `metadata.snapshot.progress`): when the quick path
settles or loses its turn, after each background model round, and when the job finishes. Each
write states the turn's whole usage so far and replaces the last, so a retried step, a round
run again or a replay never counts anything twice, and writes of different turns never wait
for each other. A figure never goes down: what was spent stays spent.

Reading the messages instead would let a user change their figures: the Data API lets them
delete their own messages and chats. These rows have no foreign key to either, and
their owner may read them (under RLS) but not write them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from infra.db import Conn
from infra.settings import ModelPrice
from infra.store.ids import ChatId, MessageId, UserId

# The statement is `handoff.record_usage` (migration 0028), where its plan lasts the session.
RECORD_SQL = """
select handoff.record_usage(
  %(message_id)s, %(model)s, %(input)s::bigint, %(output)s::bigint, %(tool_calls)s::integer)
"""
# One aggregate for a user's figures, by chat and model, within [since, until). The chat's title
# comes from the caller's view of it: null once the chat is deleted (its usage stays).
BY_CHAT_SQL = """
select u.chat_id, c.title, u.model, count(*) as turns,
       sum(u.input_tokens)::bigint as input_tokens, sum(u.output_tokens)::bigint as output_tokens,
       sum(u.tool_calls)::bigint as tool_calls
from public.reply_usage u left join public.chat c on c.id = u.chat_id
where u.user_id = %(user_id)s
  and u.created_at >= %(since)s and u.created_at < %(until)s
  and (%(chat_id)s::uuid is null or u.chat_id = %(chat_id)s)
group by u.chat_id, c.title, u.model
"""
# The operator's view, every user's (or one's), by model.
BY_USER_SQL = """
select u.user_id, a.email, u.model, count(*) as turns,
       sum(u.input_tokens)::bigint as input_tokens, sum(u.output_tokens)::bigint as output_tokens,
       sum(u.tool_calls)::bigint as tool_calls
from public.reply_usage u left join auth.users a on a.id = u.user_id
where u.created_at >= %(since)s
  and (%(user_id)s::uuid is null or u.user_id = %(user_id)s)
group by u.user_id, a.email, u.model
order by a.email nulls last, u.user_id, u.model nulls last
"""
# A user's tokens of today (UTC), and when today ends: what the daily budget counts.
# The user's tokens of today (UTC) and when the day renews (migration 0025): the same function
# checks the daily budget as a turn starts (infra/store/admission.py).
TODAY_SQL = "select tokens, renews_at, now from handoff.tokens_today(%(user_id)s)"


@dataclass(frozen=True)
class Spent:
    """What a reply's turn has used so far."""

    model: str | None
    input_tokens: int
    output_tokens: int
    tool_calls: int


@dataclass(frozen=True)
class Tally:
    """Figures summed over replies."""

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.turns + other.turns,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.tool_calls + other.tool_calls,
        )

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ChatModelTally:
    chat_id: ChatId
    title: str | None  # None: the chat was deleted
    model: str | None
    tally: Tally


@dataclass(frozen=True)
class UserModelTally:
    user_id: UserId
    email: str | None
    model: str | None
    tally: Tally


@dataclass(frozen=True)
class Today:
    tokens: int  # input and output, of the replies recorded since midnight (UTC)
    renews_at: datetime  # the next midnight (UTC)
    now: datetime  # the database's


def tally_of(row: Mapping[str, Any]) -> Tally:
    return Tally(
        turns=int(row["turns"]),
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        tool_calls=int(row["tool_calls"]),
    )


async def record(conn: Conn, message_id: MessageId, spent: Spent) -> None:
    """The reply's usage so far, in `conn`'s transaction, as the service."""
    params = {
        "message_id": message_id,
        "model": spent.model,
        "input": spent.input_tokens,
        "output": spent.output_tokens,
        "tool_calls": spent.tool_calls,
    }
    await conn.execute(RECORD_SQL, params)


async def by_chat(
    conn: Conn,
    user_id: UserId,
    *,
    since: datetime | None,
    until: datetime | None,
    chat_id: ChatId | None = None,
) -> list[ChatModelTally]:
    """The user's figures by chat and model, of the replies recorded within [since, until)."""
    params = {
        "user_id": user_id,
        "chat_id": chat_id,
        "since": since or "-infinity",
        "until": until or "infinity",
    }
    rows = await (await conn.execute(BY_CHAT_SQL, params)).fetchall()
    return [
        ChatModelTally(ChatId(row["chat_id"]), row["title"], row["model"], tally_of(row))
        for row in rows
    ]


async def by_user(
    conn: Conn, *, user_id: UUID | None, since: datetime | None
) -> list[UserModelTally]:
    """Every user's figures (or one user's) by model, as the service sees them."""
    params = {"user_id": user_id, "since": since or "-infinity"}
    rows = await (await conn.execute(BY_USER_SQL, params)).fetchall()
    return [
        UserModelTally(UserId(row["user_id"]), row["email"], row["model"], tally_of(row))
        for row in rows
    ]


async def today(conn: Conn, user_id: UserId) -> Today:
    """The user's tokens of today (UTC), by the database's clock, as the daily budget counts
    them; as the service (`conn` must act as it)."""
    row = await (await conn.execute(TODAY_SQL, {"user_id": user_id})).fetchone()
    assert row is not None  # the function's aggregate has one row
    return Today(int(row["tokens"]), row["renews_at"], row["now"])


def estimated_cost(
    model: str | None, tally: Tally, prices: Mapping[str, ModelPrice]
) -> float | None:
    """What `tally`'s tokens cost by `prices` (USD per million tokens), in USD; None for a
    model without a price, never a guess."""
    price = prices.get(model) if model is not None else None
    if price is None:
        return None
    cost = (tally.input_tokens * price.input + tally.output_tokens * price.output) / 1_000_000
    return round(cost, 6)


def sum_costs(costs: Iterable[float | None]) -> float | None:
    """The sum of several costs; None when any is unknown, as a part would understate it."""
    known = list(costs)
    if any(cost is None for cost in known):
        return None
    return round(sum(cost for cost in known if cost is not None), 6)
