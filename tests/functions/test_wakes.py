"""How long each of a job's waits for the user lasts before it reads the database."""

from __future__ import annotations

import itertools

import pytest

from functions.wakes import recheck_schedule
from infra.settings import Settings


@pytest.mark.parametrize("timeout_s", [1, 2, 3, 10, 1800, 24 * 3600, 7 * 24 * 3600])
def test_the_waits_last_the_whole_timeout_and_grow_to_their_cap(timeout_s: int) -> None:
    lengths = recheck_schedule(timeout_s, 2, 3600)
    assert sum(lengths) == timeout_s
    assert lengths[0] == min(2, timeout_s)
    assert all(1 <= length <= 3600 for length in lengths)
    # Each wait but the last is four times the one before, until the cap.
    for before, after in itertools.pairwise(lengths[:-1]):
        assert after == min(before * 4, 3600)


def test_a_wait_that_runs_its_course_costs_few_of_a_runs_steps() -> None:
    settings = Settings.model_validate({})
    schedule = [settings.wait_recheck_s, settings.wait_recheck_max_s]
    # A question or an approval nobody answers: 6 waits and 5 reads.
    assert len(recheck_schedule(settings.question_timeout_s, *schedule)) == 6
    assert len(recheck_schedule(settings.approval_timeout_s, *schedule)) == 6
    # A pause nobody resumes: 30 waits and 29 reads, of Inngest's 1,000 steps per run.
    assert len(recheck_schedule(settings.pause_timeout_s, *schedule)) == 30


def test_a_cap_below_the_first_wait_wins() -> None:
    assert recheck_schedule(10, 5, 3) == [3, 3, 3, 1]
