"""A MODEL that cannot work stops `handoff dev` at start, with one sentence that says what to do."""

from __future__ import annotations

import os
import subprocess

import pytest

from agent.model import ModelUnavailable, check_model
from tests.dev_server import HANDOFF


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("gpt-4o-mini", "MODEL must be 'scripted' or 'provider:model'"),
        (":gpt-4o-mini", "MODEL must be 'scripted' or 'provider:model'"),
        # A provider the project has no extra for, whose package is not installed.
        ("mistralai:mistral-small", "langchain-mistralai"),
        # A provider whose key is set nowhere.
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
    ],
)
def test_handoff_dev_refuses_a_model_it_cannot_use(model: str, says: str) -> None:
    env = {**os.environ, "MODEL": model, "DATABASE_URL": "postgresql://unused@127.0.0.1:1/x"}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(  # noqa: S603 - the project's own command
        [HANDOFF, "dev", "--port", "0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    # One plain sentence, before anything started: no traceback, no database touched.
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("handoff dev: ")
    assert says in line
    assert done.stdout == ""


def test_the_scripted_model_needs_nothing() -> None:
    check_model("scripted")


def test_a_wrong_model_is_a_model_error_not_a_crash_later() -> None:
    with pytest.raises(ModelUnavailable, match="not 'gpt-4o-mini'"):
        check_model("gpt-4o-mini")
