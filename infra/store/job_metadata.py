"""What a job row's `metadata` holds: every key written to `job_runs.metadata`, by the SQL of
the store modules named beside each key."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class SteeredMessage(TypedDict):
    """A message sent with `steer`: the job row keeps its id until its thread holds it, and its
    text is read from the message row (jobs stored before that carry the text themselves)."""

    id: str
    content: NotRequired[str]


class JobMetadata(TypedDict, total=False):
    """`job_runs.metadata`: each key is written only when what it says happens."""

    pauseRequested: bool  # the user asked for a pause, taken between two steps (pauses.py)
    pausedUntil: str  # a paused job's deadline, a timestamptz as JSON text (pauses.py)
    instruction: str  # what the user asked for when resuming the pause (pauses.py)
    steered: list[
        SteeredMessage
    ]  # messages that joined the job, in the order they came (steers.py)
    roundReruns: int  # model rounds run again: each may have paid the provider again (jobs.py)
    toolCalls: int  # on completion: the tool calls of the turn (jobs.py)
    durationMs: int  # on completion: since the request that started the turn (jobs.py)
