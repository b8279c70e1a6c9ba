"""The statuses of jobs and messages, and the sets of them the code asks about, each written once.

SQL names a set through `with_statuses`, which puts the set's quoted values where the statement
says `{set name}` (as literals, not parameters: the slot's `on conflict ... where` must repeat
the partial unique index's predicate to infer it). The database keeps copies it cannot take
from here: the check constraints, the partial indexes, the promotion trigger's condition, and
`handoff.slot_statuses()` and `handoff.unfinished_statuses()`, which the promotion trigger and
the policy on `active_branch` call (migration 0017). tests/infra/test_statuses.py checks every
one of those against these sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, get_args

from psycopg import sql

JobStatus = Literal["waiting", "queued", "processing", "paused", "completed", "error", "canceled"]
MessageStatus = Literal[
    "queued",
    "streaming",
    "awaiting_approval",
    "awaiting_input",
    "paused",
    "completed",
    "error",
    "canceled",
]

JOB_STATUSES: Final[tuple[JobStatus, ...]] = get_args(JobStatus)
# A job in one of these holds its chat's slot (one per chat and assistant): the unique index.
SLOT_STATUSES: Final[tuple[JobStatus, ...]] = ("queued", "processing", "paused")
# A job that has not ended: it holds the slot, or waits for it behind the one that does.
UNFINISHED_STATUSES: Final[tuple[JobStatus, ...]] = ("waiting", *SLOT_STATUSES)
JOB_ENDED_STATUSES: Final[tuple[JobStatus, ...]] = ("completed", "error", "canceled")
# A job a run holds or is about to claim: what a pause request reaches, and what `release_all`
# sends again.
RUNNING_STATUSES: Final[tuple[JobStatus, ...]] = ("queued", "processing")

MESSAGE_STATUSES: Final[tuple[MessageStatus, ...]] = get_args(MessageStatus)
# A reply whose turn goes on: drafts may still come, a cancel still ends it.
LIVE_REPLY_STATUSES: Final[tuple[MessageStatus, ...]] = (
    "queued",
    "streaming",
    "awaiting_approval",
    "awaiting_input",
    "paused",
)
# A reply whose text is being written: drafts land, a prompt to the user or a pause may take it.
WRITING_REPLY_STATUSES: Final[tuple[MessageStatus, ...]] = ("queued", "streaming")
# A reply that stays as it is: what clients wait for.
ENDED_REPLY_STATUSES: Final[tuple[MessageStatus, ...]] = ("completed", "error", "canceled")


def with_statuses(template: str, **sets: Sequence[str]) -> str:
    """`template` with each `{name}` replaced by the quoted, comma-separated values of the set
    passed as `name`; braces meant for SQL are doubled (`'{{}}'::jsonb`)."""
    lists = {name: sql.SQL(", ").join(map(sql.Literal, values)) for name, values in sets.items()}
    return sql.SQL(template).format(**lists).as_string()
