"""Five-field cron expressions (minute hour day-of-month month day-of-week), in UTC.

Enough of cron for the local executor to fire `TriggerCron` functions on their schedule:
`*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n`, and lists of those. Named months and days,
`?`, `L`, `W`, `#` and `TZ=` prefixes are rejected rather than guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

_FIELDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _parse_field(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        spec, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if spec == "*":
            start, end = low, high
        elif "-" in spec:
            a, b = spec.split("-", 1)
            start, end = int(a), int(b)
        else:
            start = int(spec)
            end = high if step_text else start
        if not (low <= start <= end <= high) or step < 1:
            raise ValueError(f"cron field {text!r} is out of range {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday (7 is folded into 0)
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, expression: str) -> Cron:
        fields = expression.split()
        if len(fields) != len(_FIELDS):
            raise ValueError(f"cron {expression!r} needs five fields")
        try:
            parsed = [_parse_field(f, lo, hi) for f, (lo, hi) in zip(fields, _FIELDS, strict=True)]
        except ValueError as exc:
            raise ValueError(f"unsupported cron {expression!r}: {exc}") from exc
        minutes, hours, days, months, weekdays = parsed
        return cls(
            minutes=minutes,
            hours=hours,
            days=days,
            months=months,
            weekdays=frozenset(d % 7 for d in weekdays),
            any_day=fields[2] == "*",
            any_weekday=fields[4] == "*",
        )

    def matches(self, at: datetime) -> bool:
        if at.minute not in self.minutes or at.hour not in self.hours:
            return False
        if at.month not in self.months:
            return False
        day = at.day in self.days
        weekday = (at.isoweekday() % 7) in self.weekdays
        # Classic cron: when both day fields are restricted, either one may match.
        if not self.any_day and not self.any_weekday:
            return day or weekday
        return day and weekday
