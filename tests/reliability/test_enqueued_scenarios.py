"""Enqueued turns under restarts: each scenario of tests/reliability/enqueued_scenarios.py, once."""

from __future__ import annotations

import pytest

from tests.databases import fresh_database
from tests.reliability.enqueued_scenarios import (
    enqueued_crash_at_every_step,
    server_killed_during_enqueued_tools,
)
from tests.reliability.scenarios import Databases
from tests.reliability.test_scenarios import CLEAN, without_time


@pytest.fixture
def databases(server_url: str, template_name: str) -> Databases:
    return lambda: fresh_database(server_url, template_name)


async def test_an_enqueued_turn_that_loses_any_steps_output_runs_each_call_once(
    databases: Databases,
) -> None:
    figures = await enqueued_crash_at_every_step(databases)
    # the reference run, then one per step: claim, the opening round, three tools, a model
    # round, finalize, and the run's final answer
    assert len(figures) == 1 + 8
    assert without_time(figures) == [CLEAN] * len(figures)


async def test_an_enqueued_turn_cut_off_by_kill_9_uses_its_stored_results(
    databases: Databases,
) -> None:
    unlogged = {k: v for k, v in CLEAN.items() if k != "max_executions"}
    assert without_time(await server_killed_during_enqueued_tools(databases)) == [unlogged]
