"""`handoff migrate` brings the database up to date and the assistant catalogue in step with
the code ASSISTANTS names, and refuses a reference it cannot load in one sentence."""

from __future__ import annotations

import os
import subprocess

from demo.assistants import ASSISTANTS as FEWER
from tests.assistants_example import ASSISTANTS
from tests.dev_server import HANDOFF
from tests.support import fetch

CATALOGUE_SQL = "select id, name, retired_at is not null as retired from assistant order by id"


def handoff_migrate(database_url: str, assistants: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "ASSISTANTS": assistants}
    return subprocess.run(  # noqa: S603 - the project's own command
        [HANDOFF, "migrate"], env=env, capture_output=True, text=True, timeout=120
    )


async def test_the_catalogue_follows_the_assistants_the_code_defines(database_url: str) -> None:
    done = handoff_migrate(database_url, "tests.assistants_example:ASSISTANTS")
    assert done.returncode == 0, done.stderr
    # The template was migrated already: nothing to apply, the catalogue written.
    assert done.stdout.strip() == "applied 0 migration(s)"
    expected = sorted((a.id, a.name, False) for a in ASSISTANTS)
    rows = await fetch(database_url, CATALOGUE_SQL)
    assert [(r["id"], r["name"], r["retired"]) for r in rows] == expected

    # A deployment with fewer: the others are kept, retired (replies still name them).
    done = handoff_migrate(database_url, "demo.assistants:ASSISTANTS")
    assert done.returncode == 0, done.stderr
    kept = {a.id for a in FEWER}
    rows = await fetch(database_url, CATALOGUE_SQL)
    assert {r["id"]: r["retired"] for r in rows} == {i: i not in kept for i, _, _ in expected}


def test_an_assistants_reference_it_cannot_load_stops_it(database_url: str) -> None:
    done = handoff_migrate(database_url, "no_such_module:ASSISTANTS")
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("handoff migrate: ASSISTANTS=no_such_module:ASSISTANTS: module")
