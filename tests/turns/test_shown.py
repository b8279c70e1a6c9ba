"""What a round's draft shows when an earlier attempt of it had shown text (turns/shown.py)."""

from __future__ import annotations

from itertools import pairwise

from agent.snapshot import RESTARTED_TEXT
from turns.shown import RoundText

BEFORE = "Let me check.\n\n"


def streamed(text: RoundText, *pieces: str) -> list[str]:
    """The drafts shown as `pieces` stream, then the one at the end."""
    drafts = []
    for piece in pieces:
        text.add(piece)
        drafts.append(text.draft)
    text.end()
    return [*drafts, text.draft]


def test_a_first_attempt_shows_its_answer_after_the_text_before() -> None:
    text = RoundText.after(BEFORE, "Let me check.")  # the quick path's draft, before the round
    assert streamed(text, "It is ", "42.") == [
        BEFORE + "It is ",
        BEFORE + "It is 42.",
        BEFORE + "It is 42.",
    ]
    assert not text.restarted


def test_an_answer_that_says_what_was_shown_goes_on_from_its_end() -> None:
    text = RoundText.after(BEFORE, BEFORE + "It is 4")
    drafts = streamed(text, "It ", "is 4", "2.")
    # The page keeps what it showed while the answer catches up, then it grows.
    assert drafts == [BEFORE + "It is 4"] * 2 + [BEFORE + "It is 42."] * 2
    assert not text.restarted


def test_an_answer_that_differs_keeps_what_was_shown_and_says_it_started_over() -> None:
    text = RoundText.after(BEFORE, BEFORE + "The answer is")
    drafts = streamed(text, "The ", "result: ", "42.")
    restarted = f"{BEFORE}The answer is\n\n{RESTARTED_TEXT}\n\n"
    assert drafts == [
        BEFORE + "The answer is",
        restarted + "The result: ",
        restarted + "The result: 42.",
        restarted + "The result: 42.",
    ]
    assert text.restarted
    assert all(later.startswith(earlier) for earlier, later in pairwise(drafts))


def test_an_answer_that_ends_short_of_what_was_shown_started_over() -> None:
    text = RoundText.after(BEFORE, BEFORE + "It is 42, since")
    assert streamed(text, "It is 42")[-1] == (
        f"{BEFORE}It is 42, since\n\n{RESTARTED_TEXT}\n\nIt is 42"
    )
    assert text.restarted
