"""The tool call arguments a person approves: nothing hidden, nothing reordered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.display import display_arguments, hidden, visible

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e"]
ISOLATES = ["\u2066", "\u2067", "\u2068", "\u2069"]
MARKS = ["\u200e", "\u200f", "\u061c"]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]
CONTROLS = ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\x9b"]
OTHER_INVISIBLE = [
    "\u00ad",  # soft hyphen
    "\u2028",  # line separator
    "\u2029",  # paragraph separator
    "\u034f",  # combining grapheme joiner
    "\u3164",  # Hangul filler
    "\ufe0f",  # variation selector 16
    "\U000e0041",  # tag latin capital A ("ASCII smuggling")
    "\U000e0100",  # variation selector 17
    "\ue000",  # private use
]
EVERY_HIDDEN = BIDI + ISOLATES + MARKS + ZERO_WIDTH + CONTROLS + OTHER_INVISIBLE


@pytest.mark.parametrize("char", EVERY_HIDDEN, ids=lambda c: f"U+{ord(c):04X}")
def test_each_hidden_character_shows_as_its_escape(char: str) -> None:
    args = {"subject": f"invoice{char}fdp.exe"}
    shown = display_arguments(args)
    assert hidden(char)
    assert char not in shown
    code = ord(char)
    if code <= 0xFFFF:
        assert f"invoice\\u{code:04x}fdp.exe" in shown
    # Still JSON, and the same arguments.
    assert json.loads(shown) == args


def test_a_right_to_left_override_cannot_turn_an_exe_into_a_pdf() -> None:
    shown = display_arguments({"attachment": "invoice\u202efdp.exe"})
    assert shown == '{\n  "attachment": "invoice\\u202efdp.exe"\n}'


def test_astral_characters_escape_as_their_surrogate_pair() -> None:
    assert visible("a\U000e0041b") == "a\\udb40\\udc41b"


@pytest.mark.parametrize(
    "args",
    [
        {"to": "ada@example.com", "subject": "Minutes", "body": "See attached."},
        {"subject": "Grüße aus Köln", "body": "日本語のテキスト، والعربية, עברית 😀"},
        {"body": "line one\nline two\ttabbed"},
        {"nested": {"list": [1, 2.5, None, True, "x"]}, "empty": {}},
        {},
    ],
)
def test_ordinary_text_of_any_script_is_shown_as_it_is(args: dict[str, Any]) -> None:
    shown = display_arguments(args)
    assert shown == json.dumps(args, indent=2, ensure_ascii=False)
    assert json.loads(shown) == args


def test_line_breaks_inside_a_value_stay_escaped_and_the_layout_stays() -> None:
    shown = display_arguments({"body": "one\ntwo\u2028three"})
    assert shown.splitlines() == ["{", '  "body": "one\\ntwo\\u2028three"', "}"]


def test_a_plain_text_escapes_its_line_breaks_unless_kept() -> None:
    assert visible("send\n\x1b[2Jnow") == "send\\u000a\\u001b[2Jnow"
    assert visible("a\nb\u200bc", keep="\n") == "a\nb\\u200bc"
