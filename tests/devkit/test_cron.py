"""Cron schedules for the local executor: which minutes they fire in, and what they refuse."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from devkit.local_inngest.cron import Cron

# A Sunday.
AT = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("* * * * *", True),
        ("30 9 * * *", True),
        ("31 9 * * *", False),
        ("*/15 * * * *", True),
        ("*/7 * * * *", False),
        ("0-30/10 8-10 * * *", True),
        ("30 9 22 11 *", True),
        ("30 9 * NOV SUN", True),
        ("30 9 * * 0", True),
        ("30 9 * * 7", True),  # 7 is Sunday too
        ("30 9 * * 1-5", False),
        ("30 9 1 * 0", True),  # both day fields restricted: either may match
        ("30 9 1 * 1", False),
        ("30 9 * * SUN#4", True),  # the fourth Sunday of November
        ("15,30,45 * * * *", True),
    ],
)
def test_fires_in_the_minute_its_fields_name(expression: str, expected: bool) -> None:
    assert Cron.parse(expression).matches(AT) is expected


def test_fires_once_in_each_matching_minute_of_a_day() -> None:
    # GIVEN a schedule, WHEN the executor asks about every minute of a day (as it does at the
    # top of each one, a little late)
    cron = Cron.parse("0-30/10 8-9 * * *")
    start = datetime(2026, 11, 22, tzinfo=UTC)
    minutes = [start + timedelta(minutes=m, seconds=0.001) for m in range(24 * 60)]

    # THEN exactly the named minutes fire
    fired = [at.strftime("%H:%M") for at in minutes if cron.matches(at)]
    assert fired == ["08:00", "08:10", "08:20", "08:30", "09:00", "09:10", "09:20", "09:30"]


def test_reads_any_time_in_utc() -> None:
    cron = Cron.parse("30 9 * * *")
    # The same instant in UTC+2, and a naive time, which is taken as UTC.
    assert cron.matches(datetime(2026, 11, 22, 11, 30, 59, tzinfo=timezone(timedelta(hours=2))))
    assert cron.matches(datetime(2026, 11, 22, 9, 30, 12))
    assert not cron.matches(datetime(2026, 11, 22, 9, 30, tzinfo=timezone(timedelta(hours=2))))


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("* * * *", "needs five fields"),
        ("0 * * * * *", "needs five fields"),  # seconds: schedules fire on whole minutes
        ("@daily", "needs five fields"),
        ("60 * * * *", "bad minute"),
        ("* 24 * * *", "bad hour"),
        ("*/0 * * * *", "bad minute"),
        ("0 0 31 2 *", "bad day-of-month"),
        ("* * * 13 *", "bad month"),
        ("* * * * MON#6", "bad day-of-week"),
        ("TZ=Europe/Paris 0 12 * * 5", "time zones are not supported"),
    ],
)
def test_rejects_an_expression_saying_what_is_wrong(expression: str, problem: str) -> None:
    with pytest.raises(ValueError, match=f"^cron {re.escape(repr(expression))}.*{problem}"):
        Cron.parse(expression)
