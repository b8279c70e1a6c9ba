"""Deferred package bodies: skipped at import, run whole on first use, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.handlers.test_lambda_entries import ROOT


def run_fresh(program: str) -> dict[str, object]:
    """What `program` (with the bodies deferred) prints as JSON, from a fresh interpreter."""
    code = "from infra.deferred_imports import defer_package_bodies\ndefer_package_bodies()\n"
    out = subprocess.run(  # noqa: S603 - our own interpreter and a literal program
        [sys.executable, "-c", code + textwrap.dedent(program)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_a_graph_builds_without_the_packages_bodies() -> None:
    # GIVEN the bodies deferred, WHEN LangGraph and LangChain's runnables are imported (they
    # import submodules of both packages), THEN neither body ran: no SDK client, no API types
    result = run_fresh(
        """
        import json, sys
        import langchain_core.runnables, langgraph.graph
        heavy = ["langgraph_sdk.client", "langsmith.types.run", "websockets"]
        print(json.dumps({
            "submodules": "langgraph_sdk.auth.types" in sys.modules,
            "heavy": [name for name in heavy if name in sys.modules],
        }))
        """
    )
    assert result == {"submodules": True, "heavy": []}


def test_the_first_name_asked_for_runs_the_body_and_is_answered() -> None:
    # GIVEN deferred packages, WHEN code asks each for a name only its body defines, THEN it
    # gets the real thing, as without the deferral
    result = run_fresh(
        """
        import json
        import langgraph_sdk
        from langgraph_sdk.client import get_client
        from langsmith.types import Run
        from pydantic import BaseModel, EmailStr

        class Person(BaseModel):
            email: EmailStr

        print(json.dumps({
            "client": langgraph_sdk.get_client is get_client,
            "run": Run.__module__,
            "email": Person(email="someone@example.com").email,
        }))
        """
    )
    assert result == {
        "client": True,
        "run": "langsmith.types.run",
        "email": "someone@example.com",
    }
