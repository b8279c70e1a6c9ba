"""Five-field cron expressions (minute hour day-of-month month day-of-week), in UTC.

cronsim parses and evaluates them, with Debian cron's syntax and day rules (names, ranges,
steps, lists, `L`, `LW`, `#`). Two things it would take are refused: Inngest's `TZ=` prefix,
since the local executor keeps every schedule in UTC, and a leading seconds field, since
schedules fire at the top of a minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronsim import CronSim, CronSimError

_FIELDS = 5
_MINUTE = timedelta(minutes=1)
_ANY_TIME = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Cron:
    expression: str

    @classmethod
    def parse(cls, expression: str) -> Cron:
        """The schedule; ValueError naming the expression and what is wrong with it."""
        fields = expression.split()
        if fields and fields[0].startswith("TZ="):
            raise ValueError(f"cron {expression!r}: time zones are not supported; write it in UTC")
        if len(fields) != _FIELDS:
            raise ValueError(
                f"cron {expression!r} needs five fields: minute hour day-of-month month day-of-week"
            )
        try:
            # cronsim parses on construction; the start time only matters to iteration.
            CronSim(expression, _ANY_TIME)
        except CronSimError as exc:
            raise ValueError(f"cron {expression!r}: {str(exc).lower()}") from exc
        return cls(expression)

    def matches(self, at: datetime) -> bool:
        """Whether the schedule fires in the minute of `at` (naive: read as UTC)."""
        utc = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
        minute = utc.replace(second=0, microsecond=0)
        # cronsim yields the first firing after its start; None if none within 50 years.
        return next(CronSim(self.expression, minute - _MINUTE), None) == minute
