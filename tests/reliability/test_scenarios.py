"""Nothing lost or doubled: each scenario of tests/reliability/scenarios.py, run once."""

from __future__ import annotations

import pytest

from tests.databases import fresh_database
from tests.reliability.scenarios import (
    MAX_ACTIVE,
    Databases,
    Figures,
    client_disconnect,
    crash_at_every_step,
    duplicate_deliveries,
    large_tool_output,
    one_users_burst,
    outbox_resend,
    quick_path_killed,
    replay_after_failure,
    round_answered_anew,
    round_past_budget,
)

CLEAN = {"final_messages": 1, "duplicates": 0, "lost": 0, "max_executions": 1}


@pytest.fixture
def databases(server_url: str, template_name: str) -> Databases:
    return lambda: fresh_database(server_url, template_name)


def without_time(figures: list[Figures]) -> list[dict[str, int]]:
    return [{k: v for k, v in f.items() if k != "seconds"} for f in figures]  # type: ignore[misc]


async def test_duplicate_deliveries_and_replays_leave_one_reply(databases: Databases) -> None:
    assert without_time(await duplicate_deliveries(databases)) == [CLEAN]


async def test_replay_of_a_failed_job_resumes_and_completes(databases: Databases) -> None:
    assert without_time(await replay_after_failure(databases)) == [CLEAN]


async def test_a_crash_after_any_step_changes_nothing(databases: Databases) -> None:
    figures = await crash_at_every_step(databases)
    # the reference run, then one per step: claim, three tools, two model rounds, finalize,
    # and the run's final answer
    assert len(figures) == 1 + 8
    assert without_time(figures) == [CLEAN] * len(figures)


async def test_a_failed_send_is_resent_by_the_outbox_relay(databases: Databases) -> None:
    assert without_time(await outbox_resend(databases)) == [CLEAN]


async def test_a_client_that_hangs_up_still_gets_its_turn(databases: Databases) -> None:
    assert without_time(await client_disconnect(databases)) == [CLEAN]


async def test_a_round_past_its_budget_ends_once_with_what_it_showed(databases: Databases) -> None:
    assert without_time(await round_past_budget(databases)) == [CLEAN]


async def test_a_server_killed_mid_stream_leaves_an_interrupted_reply_and_a_free_chat(
    databases: Databases,
) -> None:
    assert without_time(await quick_path_killed(databases)) == [CLEAN]


async def test_a_3_mb_tool_output_is_cut_short_and_the_turn_completes(
    databases: Databases,
) -> None:
    unlogged = {k: v for k, v in CLEAN.items() if k != "max_executions"}
    assert without_time(await large_tool_output(databases)) == [unlogged]


async def test_a_users_burst_past_their_limit_loses_and_doubles_nothing(
    databases: Databases,
) -> None:
    assert without_time(await one_users_burst(databases)) == [
        {**CLEAN, "final_messages": MAX_ACTIVE}
    ]


async def test_a_round_answered_anew_after_a_mid_stream_failure_keeps_what_it_showed(
    databases: Databases,
) -> None:
    assert without_time(await round_answered_anew(databases)) == [CLEAN, CLEAN]
