"""Per-user limits on turns and chats, counted in Postgres so that they hold across processes.

- **Turns per minute** (`MAX_TURNS_PER_MINUTE`) and **chats per minute**
  (`MAX_CHATS_PER_MINUTE`): the turns the user started, the chats they created, in the last 60
  seconds. `handoff.user_limits` keeps each user's latest few of each, by time (migration 0012).
- **Active turns** (`MAX_ACTIVE_TURNS_PER_USER`): the user's jobs that have not ended, in any of
  their chats (`UNFINISHED_STATUSES`, infra/store/statuses.py): `waiting` (enqueued behind
  another turn), `queued`, `processing` (a quick path streaming, a background job running or
  waiting for an approval) and `paused`. A quick job silent past
  `TURN_LEASE_S` is taken for dead (infra/store/jobs.py) and does not count; a message sent with
  `interrupt` does not count the job it cancels. A turn whose reply or chat was deleted while it
  ran counts until its run stops (infra/store/erased_turns.py). Counted by the statement that
  stores the user's message (infra/store/admission.py).

`handoff.admit` (migration 0025) comes first in the transaction that stores the message or the chat:
`admit` below for a chat, `handoff.start_turn` for a message (infra/store/admission.py). It takes
the user's row of `handoff.user_limits`, which makes the other requests of that user wait until this
transaction ends, and adds this request's time only while fewer than the limit are within the
window. So two requests sent together cannot both pass on the same count: the second one reads the
first one's row once the first has committed, and under READ COMMITTED its later statements see the
first one's job too. A request past a limit raises, and its transaction rolls back: nothing of it is
stored, its time included. A turn's limits cost no statement of their own: they are part of the one
that starts it.

The times live outside the Data API: a user cannot make room by deleting their own messages or
chats. Nor can they create a chat there (migration 0017): only the API's, counted here, exist.

- **Daily tokens** (`MAX_USER_DAILY_TOKENS`, unset: none): the input and output tokens of the user's
  replies recorded since midnight UTC, summed from `public.reply_usage` (infra/store/usage.py) by
  `handoff.tokens_today`, one index-only range over the user's rows of today, which
  `handoff.start_turn` asks after the turns per minute. Those rows, too, are out of the user's
  reach: they read them but cannot edit or delete them, and deleting messages or chats leaves them.
  A turn's tokens are known only as its model rounds are stored, so the check counts the turns that
  have stored a round; the turns still running when the budget is reached finish, and the day's
  total may pass the budget by what they use (at most MAX_ACTIVE_TURNS_PER_USER turns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from psycopg import errors

from infra.db import Conn
from infra.store.chats import UnknownUser
from infra.store.ids import UserId

WINDOW_S = 60
# When one of the user's turns ends cannot be known: this is how soon asking again may pay off.
ACTIVE_TURNS_RETRY_S = 5

Counted = Literal["turns", "chats"]

# handoff.admit (migration 0025) takes the user's row, then keeps the newest `limit - count`
# times of the window and adds `count` of now; it changes nothing, but still locks the row, when
# fewer than `count` more fit, and returns the seconds until the time whose leaving the window
# makes room for them. handoff.start_turn calls it for turns (infra/store/admission.py).
ADMIT_SQL = "select handoff.admit(%s, %s, %s, %s, %s) as wait_s"


@dataclass(frozen=True)
class TurnLimits:
    max_active: int
    per_minute: int
    # A quick job silent this long is taken for dead and does not count (TURN_LEASE_S).
    lease_s: float
    # MAX_USER_DAILY_TOKENS; None: no budget.
    daily_tokens: int | None = None
    # A background run silent this long may be taken over (JOB_LEASE_S): how long a deleted
    # job's run is counted at most (infra/store/erased_turns.py).
    job_lease_s: float = 900.0


class LimitReached(RuntimeError):
    """A per-user limit refused the request; `retry_after_s` says when asking again may pass."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class TooManyActiveTurns(LimitReached):
    """The user has MAX_ACTIVE_TURNS_PER_USER turns that have not ended."""


class TooManyTurns(LimitReached):
    """The user started MAX_TURNS_PER_MINUTE turns in the last minute."""


class TooManyChats(LimitReached):
    """The user created MAX_CHATS_PER_MINUTE chats in the last minute."""


class TokenBudgetSpent(LimitReached):
    """The user's replies used MAX_USER_DAILY_TOKENS tokens today (UTC); `retry_after_s` is
    until midnight UTC."""


REFUSALS: dict[Counted, type[LimitReached]] = {"turns": TooManyTurns, "chats": TooManyChats}


async def admit(
    conn: Conn, user_id: UserId, counted: Counted, *, limit: int, count: int = 1
) -> None:
    """Count `count` more of the user's turns or chats within the last minute, in `conn`'s
    transaction, as the service; TooManyTurns or TooManyChats when they would pass `limit`.
    Until the transaction ends, the user's other requests wait here: call it first. (A turn's
    start counts its turns itself, in the same function: infra/store/admission.py.)"""
    try:
        row = await (
            await conn.execute(ADMIT_SQL, (user_id, counted, limit, count, WINDOW_S))
        ).fetchone()
    except errors.ForeignKeyViolation as exc:
        raise UnknownUser from exc
    if row is None or row["wait_s"] is None:
        return
    raise REFUSALS[counted](max(1, math.ceil(row["wait_s"])))
