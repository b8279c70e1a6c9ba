"""`handoff dev`'s banner: its examples are the default assistant's conversation starters, and
the curl command it prints sends what it says, quoted for a shell."""

from __future__ import annotations

import json
import shlex
import uuid

import pytest

from devkit.dev_banner import print_ready
from infra.store.ids import ChatId

CHAT = ChatId(uuid.UUID("00000000-0000-4000-8000-0000000000aa"))


def banner(capsys: pytest.CaptureFixture[str], starters: list[str]) -> str:
    print_ready(
        "http://127.0.0.1:9", "tok", "engine", email="a@b.c", chat_id=CHAT, starters=starters
    )
    return capsys.readouterr().out


def curl_body(out: str) -> object:
    data = next(line for line in out.splitlines() if line.lstrip().startswith("-H 'Content"))
    words = shlex.split(data)
    return json.loads(words[words.index("-d") + 1])


def terminal_message(out: str) -> str:
    line = next(line for line in out.splitlines() if line.startswith("In a terminal:"))
    return shlex.split(line)[-1]


def test_the_examples_are_the_default_assistants_starters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = banner(capsys, ['Quote "this" and it\'s fine', '/lookup {"id": 4}'])
    assert curl_body(out) == {"chatId": str(CHAT), "content": 'Quote "this" and it\'s fine'}
    assert terminal_message(out) == '/lookup {"id": 4}'


def test_without_starters_a_greeting(capsys: pytest.CaptureFixture[str]) -> None:
    out = banner(capsys, [])
    assert curl_body(out) == {"chatId": str(CHAT), "content": "hello"}
    assert terminal_message(out) == "hello"
