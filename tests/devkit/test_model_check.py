"""A MODEL, or an ASSISTANTS definition, that cannot work stops `handoff dev` and both Lambda
entries at start, with one sentence that says what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.model import ModelUnavailable, check_model
from tests.dev_server import HANDOFF


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("gpt-4o-mini", "MODEL must be 'scripted' or 'provider:model'"),
        (":gpt-4o-mini", "MODEL must be 'scripted' or 'provider:model'"),
        # A provider the project has no extra for, whose package is not installed: added with
        # uv, as the project's dependencies are.
        ("mistralai:mistral-small", "`uv add langchain-mistralai`"),
        # A provider LangChain does not know, the nearest it knows suggested.
        ("opnai:gpt-4o-mini", "LangChain has no provider 'opnai'; did you mean 'openai'?"),
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


def test_handoff_dev_refuses_an_assistants_reference_it_cannot_load() -> None:
    env = {
        **os.environ,
        "ASSISTANTS": "no_such_module:ASSISTANTS",
        "DATABASE_URL": "postgresql://unused@127.0.0.1:1/x",
    }
    done = subprocess.run(  # noqa: S603 - the project's own command
        [HANDOFF, "dev", "--port", "0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("handoff dev: ASSISTANTS=no_such_module:ASSISTANTS: module")
    assert done.stdout == ""


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("entry", ["handlers.lambda_respond", "functions.lambda_inngest"])
def test_a_lambda_fails_at_init_with_the_broken_definition(entry: str) -> None:
    env = {**os.environ, "MODEL": "openai:gpt-4o-mini", "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    env.pop("SSM_PARAMETER_PATH", None)
    done = subprocess.run(  # noqa: S603 - the project's own module
        [sys.executable, "-c", f"import {entry}"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("agent.assistants.AssistantDefinitionError: Assistant 'default': ")
    assert "MODEL=openai:gpt-4o-mini cannot be used" in last


def test_the_scripted_model_needs_nothing() -> None:
    check_model("scripted")


def test_a_wrong_model_is_a_model_error_not_a_crash_later() -> None:
    with pytest.raises(ModelUnavailable, match="not 'gpt-4o-mini'"):
        check_model("gpt-4o-mini")
