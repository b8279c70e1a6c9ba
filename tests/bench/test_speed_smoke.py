"""The speed bench in its smallest mode, without the LangGraph server: every section runs and
produces numbers. No timing is asserted; BENCHMARKS.md is where the figures live."""

from __future__ import annotations

import math

from bench.speed import Options, run


def _number(cell: str) -> float | None:
    try:
        return float(cell.rstrip("x"))
    except ValueError:
        return None


async def test_the_quick_speed_run_fills_every_table() -> None:
    # WHEN the bench runs in its smallest mode
    report = await run(Options.quick_run(langgraph=False))

    # THEN nothing failed, and all seven sections are there, in order
    assert report.errors == []
    assert [t.title.split(".")[0] for t in report.tables] == [str(n) for n in range(1, 8)]
    # AND every row of every table carries at least one finite number
    for table in report.tables:
        assert table.rows, table.title
        for row in table.rows:
            assert len(row) == len(table.header)
            numbers = [n for n in map(_number, row) if n is not None]
            assert numbers, (table.title, row)
            assert all(math.isfinite(n) for n in numbers), (table.title, row)
    # AND the headline says something about every target it could check
    assert len(report.headline) >= 6
    rendered = report.render()
    assert all(t.title in rendered for t in report.tables)
