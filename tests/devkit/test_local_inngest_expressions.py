"""The expression and duration subset LocalInngest evaluates, and what it refuses."""

from __future__ import annotations

import pytest

from devkit.local_inngest.expressions import (
    UnsupportedExpression,
    compile_filter,
    compile_match,
    parse_duration,
)

TRIGGER = {"name": "chat/started", "data": {"chatId": "c1", "meta": {"kind": "demo"}}}
INCOMING = {"name": "chat/cancel", "data": {"chatId": "c1", "reason": "user", "empty": None}}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("async.data.reason == 'user'", True),
        ('async.data.reason == "user"', True),
        ("'user' == async.data.reason", True),
        ("async.data.reason == 'system'", False),
        ("event.data.chatId == async.data.chatId", True),
        ("async.data.chatId == event.data.chatId", True),
        ("event.data.meta.kind == 'demo'", True),
        ("event.data.chatId==async.data.chatId&&async.data.reason=='user'", True),
        ("event.data.chatId == async.data.chatId && async.data.reason == 'system'", False),
        # Missing and null fields never match, not even each other.
        ("async.data.missing == event.data.missing", False),
        ("async.data.empty == event.data.meta.absent", False),
        ("async.data.reason == 'a && b'", False),
    ],
)
def test_supported_expressions_compare_the_trigger_and_the_arriving_event(
    expr: str, expected: bool
) -> None:
    assert compile_match(expr)(TRIGGER, INCOMING) is expected


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "async.data.amount > 10",
        "async.data.reason != 'user'",
        "async.data.reason == 'user' || async.data.reason == 'admin'",
        "async.data.reason == 'user' &&",
        "(async.data.reason == 'user')",
        "async.data.count == 3",
        "'user' == 'user'",
        "data.reason == 'user'",
        "async.data.reason == 'it\\'s'",
        "async.data.reason.startsWith('u')",
    ],
)
def test_anything_else_is_refused_with_the_expression_named(expr: str) -> None:
    with pytest.raises(UnsupportedExpression, match="refusing"):
        compile_match(expr)


def test_trigger_filters_see_only_the_event() -> None:
    matches = compile_filter("event.data.chatId == 'c1'")
    assert matches is not None
    assert matches(TRIGGER)
    with pytest.raises(UnsupportedExpression, match="refusing"):
        compile_filter("async.data.chatId == 'c1'")
    assert compile_filter(None) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1),
        ("1800s", 1800),
        ("30m", 1800),
        ("1h", 3600),
        ("1d", 86400),
        ("2w", 1209600),
        ("500ms", 0.5),
        ("1h30m", 5400),
    ],
)
def test_inngest_durations_are_read_as_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1", "m", "1x", "1h 30m", "-1s"])
def test_unreadable_durations_are_refused(text: str) -> None:
    with pytest.raises(UnsupportedExpression, match="duration"):
        parse_duration(text)
