"""The cold first-token bench in its smallest run: the built respond artefact, started by
run.sh, answers its first reply and a warm one, with its shipped bytecode and without. No timing is
asserted; BENCHMARKS.md is where the figures live."""

from __future__ import annotations

import platform
import sys

import pytest

from bench.cold_first_token import built_tasks, measure, render


@pytest.mark.timeout(300)
async def test_a_cold_respond_artefact_answers_its_first_reply_with_a_token() -> None:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("the artefact holds Linux x86_64 wheels")
    with built_tasks() as tasks:
        # The shipped artefact carries bytecode; its copy for the "before" figures carries none.
        assert list(tasks.shipped["respond"].rglob("__pycache__/*.pyc"))
        assert not list(tasks.sources_only["respond"].rglob("__pycache__"))
        figures = await measure(1, tasks)
    assert list(figures) == ["bytecode shipped in the zip", "no bytecode (the zip before)"]
    for f in figures.values():
        assert len(f.ready) == len(f.cold) == len(f.warm) == 1
        # Ready before the first token, which came after the process started.
        assert 0 < f.ready[0] < f.cold[0]
        assert f.warm[0] > 0
    assert render(figures, 1).count("| cold, ") == 2
