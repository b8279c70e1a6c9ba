"""agent/mentions.py: which assistants a message names."""

from __future__ import annotations

import pytest

from agent.mentions import mentioned

ASSISTANTS = [("helper", "Helper"), ("research", "Research Bot"), ("res", "Res")]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("@helper what is 2+2?", ["helper"]),
        ("@HELPER and @helper again", ["helper"]),
        ("ask @Research Bot, then @helper", ["research", "helper"]),
        ("@research-bot is not a name", []),  # a longer word than any id or name
        ("@Res, then @Research Bot", ["res", "research"]),
        ("hello everyone", []),
        ("@nobody is plain text", []),
        ("write to ada@helper.dev please", []),
        ("see https://example.com/@helper and www.example.com/@helper", []),
        ("`@helper` in code, ```\n@research\n``` in a block", []),
        ("(@helper) and @helper.", ["helper"]),
        ("an unclosed ```@helper", []),
        ("@", []),
        ("ß@helper", []),  # a letter before the @: an address, whatever the script
        ("straße @helper", ["helper"]),  # case folding that changes length elsewhere
    ],
)
def test_mentions(content: str, expected: list[str]) -> None:
    assert mentioned(content, ASSISTANTS) == expected


def test_an_assistant_is_found_by_its_id_or_its_name() -> None:
    assert mentioned("@Research Bot @res", ASSISTANTS) == ["research", "res"]
    assert mentioned("@research", ASSISTANTS) == ["research"]
