"""The functions the executor drives, read from the SDK's own registration config."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import inngest

from devkit.local_inngest.cron import Cron
from devkit.local_inngest.expressions import (
    PATH_EXPR,
    EventFilter,
    Match,
    compile_filter,
    compile_match,
)

# Inngest's documented default when a function sets no `retries`.
DEFAULT_RETRIES = 4
# The SDK registers every function's entry point under this step id.
ROOT_STEP = "step"


@dataclasses.dataclass(frozen=True)
class CancelClause:
    """One entry of a function's ``cancel``: which later event stops a run, and until when."""

    event: str
    match: Match | None
    # Seconds after the run started during which the clause applies; None: for the whole run.
    timeout_s: float | None

    def cancels(self, trigger: Mapping[str, Any], incoming: Mapping[str, Any]) -> bool:
        if incoming["name"] != self.event:
            return False
        return self.match is None or self.match(trigger, incoming)


@dataclasses.dataclass(frozen=True)
class Target:
    fn_id: str
    triggers: tuple[tuple[str, EventFilter | None], ...]
    crons: tuple[tuple[str, Cron], ...]
    max_attempts: int
    concurrency: tuple[inngest.Concurrency, ...]
    is_failure_handler: bool
    cancels: tuple[CancelClause, ...] = ()

    def matches(self, event: Mapping[str, Any]) -> bool:
        name = str(event["name"])
        for pattern, predicate in self.triggers:
            named = pattern == name or (pattern.endswith("*") and name.startswith(pattern[:-1]))
            if named and (predicate is None or predicate(event)):
                return True
        return False


def build_targets(functions: Sequence[inngest.Function[Any]], serve_url: str) -> list[Target]:
    """One target per function and per on_failure handler; unsupported options raise."""
    out: list[Target] = []
    for fn in functions:
        config = fn.get_config(serve_url)
        for fc in (config.main, config.on_failure):
            if fc is None:
                continue
            for c in fc.concurrency or []:
                if c.key is not None and not PATH_EXPR.match(c.key):
                    raise ValueError(f"{fc.id}: unsupported concurrency key {c.key!r}")
            retries = fc.steps[ROOT_STEP].retries
            triggers = tuple(
                (t.event, compile_filter(t.expression))
                for t in fc.triggers
                if isinstance(t, inngest.TriggerEvent)
            )
            crons = tuple(
                (t.cron, Cron.parse(t.cron))
                for t in fc.triggers
                if isinstance(t, inngest.TriggerCron)
            )
            out.append(
                Target(
                    fn_id=fc.id,
                    triggers=triggers,
                    crons=crons,
                    max_attempts=(DEFAULT_RETRIES if retries is None else retries.attempts) + 1,
                    concurrency=tuple(fc.concurrency or ()),
                    is_failure_handler=fc is config.on_failure,
                    cancels=tuple(_cancel_clause(fc.id, c) for c in fc.cancel or ()),
                )
            )
    return out


def _cancel_clause(fn_id: str, cancel: inngest.Cancel) -> CancelClause:
    try:
        match = None if cancel.if_exp is None else compile_match(cancel.if_exp)
    except ValueError as err:
        raise ValueError(f"{fn_id}: cancel on {cancel.event!r}: {err}") from err
    timeout = cancel.timeout
    # The SDK reads an int timeout as milliseconds.
    if isinstance(timeout, datetime.timedelta):
        timeout_s: float | None = timeout.total_seconds()
    else:
        timeout_s = None if timeout is None else timeout / 1000
    return CancelClause(event=cancel.event, match=match, timeout_s=timeout_s)
