"""The dev page's @-mentions (the JavaScript client's, as devkit/dev_page/client/mentions.js has
them), run under node: the mention being typed at the caret, the chat's assistants it may name,
and the text once one is chosen."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest

from devkit.dev_routes import PAGE_DIR

ASSISTANTS = [
    {"id": "default", "name": "Helper"},
    {"id": "calculator", "name": "Calculator"},
    {"id": "trip-planner", "name": "Trip Planner"},
]
SCRIPT = """
const { mentionAt, matchingAssistants, completeMention } = await import(process.argv[1]);
const { assistants, cases } = JSON.parse(process.argv[2]);
const results = cases.map(([text, caret, pick]) => {
  const mention = mentionAt(text, caret);
  const matches = mention ? matchingAssistants(assistants, mention.query).map((a) => a.id) : [];
  const chosen = assistants.find((a) => a.id === pick);
  const done = mention && chosen ? completeMention(text, mention, caret, chosen) : null;
  return { mention, matches, done };
});
process.stdout.write(JSON.stringify(results));
"""


def run(cases: list[tuple[str, int, str | None]]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("the mentions test needs node; .ci/run installs it")
        pytest.skip("the mentions test needs node")
    module = (PAGE_DIR / "client" / "mentions.js").as_uri()
    argument = json.dumps({"assistants": ASSISTANTS, "cases": cases})
    out = subprocess.run(  # noqa: S603
        [node, "--input-type=module", "-e", SCRIPT, module, argument],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    results: list[dict[str, Any]] = json.loads(out)
    return results


def test_a_mention_is_an_at_sign_at_the_start_or_after_a_space() -> None:
    typed, after_word, in_address, none, later = run(
        [
            ("Ask @", 5, None),
            ("Hi @cal", 7, None),
            ("me@calc", 7, None),
            ("Hi", 2, None),
            ("@ca then", 3, None),
        ]
    )
    assert typed["mention"] == {"start": 4, "query": ""}
    assert typed["matches"] == ["default", "calculator", "trip-planner"]
    assert after_word["mention"] == {"start": 3, "query": "cal"}
    assert after_word["matches"] == ["calculator"]
    # an address is no mention; neither is text without an `@`
    assert in_address["mention"] is None
    assert none["mention"] is None
    # the caret decides: a mention before the rest of the text
    assert later["mention"] == {"start": 0, "query": "ca"}


def test_the_query_matches_an_id_a_name_or_a_word_of_the_name_in_any_case() -> None:
    by_name, by_word, by_id, nothing = run(
        [("@HEL", 4, None), ("@plan", 5, None), ("@trip-", 6, None), ("@zz", 3, None)]
    )
    assert by_name["matches"] == ["default"]
    assert by_word["matches"] == ["trip-planner"]
    assert by_id["matches"] == ["trip-planner"]
    assert nothing["matches"] == []


def test_completing_writes_the_id_and_a_space_and_keeps_the_rest() -> None:
    at_end, mid_text, over_a_word = run(
        [
            ("Ask @ca", 7, "calculator"),
            ("@tr and more", 3, "trip-planner"),
            ("Ask @calcu now", 7, "calculator"),
        ]
    )
    assert at_end["done"] == {"text": "Ask @calculator ", "caret": 16}
    assert mid_text["done"] == {"text": "@trip-planner and more", "caret": 14}
    # the rest of the word the caret is in is replaced too
    assert over_a_word["done"] == {"text": "Ask @calculator now", "caret": 16}
