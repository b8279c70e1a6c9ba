"""Cron schedules for the local executor."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from devkit.local_inngest.cron import Cron

# A Sunday.
AT = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "at", "expected"),
    [
        ("* * * * *", AT, True),
        ("30 9 * * *", AT, True),
        ("31 9 * * *", AT, False),
        ("*/15 * * * *", AT, True),
        ("*/7 * * * *", AT, False),
        ("0-30/10 8-10 * * *", AT, True),
        ("30 9 22 11 *", AT, True),
        ("30 9 * * 0", AT, True),
        ("30 9 * * 7", AT, True),  # 7 is Sunday too
        ("30 9 * * 1-5", AT, False),
        ("30 9 1 * 0", AT, True),  # both day fields restricted: either may match
        ("30 9 1 * 1", AT, False),
        ("15,30,45 * * * *", AT, True),
    ],
)
def test_matches(expression: str, at: datetime, expected: bool) -> None:
    assert Cron.parse(expression).matches(at) is expected


@pytest.mark.parametrize(
    "expression",
    ["* * * *", "60 * * * *", "* 24 * * *", "*/0 * * * *", "* * * JAN *", "TZ=UTC * * * * *"],
)
def test_rejects_what_it_does_not_understand(expression: str) -> None:
    with pytest.raises(ValueError, match="cron"):
        Cron.parse(expression)
