"""The draft transport bench in its smallest mode: every table is there and holds numbers. No
timing is asserted; BENCHMARKS.md is where the figures live."""

from __future__ import annotations

import math

from bench.draft_transport import Options, run


def _number(cell: str) -> float | None:
    try:
        return float(cell.rstrip("x"))
    except ValueError:
        return None


async def test_the_quick_draft_transport_run_fills_every_table() -> None:
    report = await run(Options.quick_run())

    assert report.errors == []
    assert [t.title.split(".")[0] for t in report.tables] == ["1", "2", "3"]
    for table in report.tables:
        assert table.rows, table.title
        for row in table.rows:
            numbers = [n for n in map(_number, row) if n is not None]
            assert numbers, (table.title, row)
            assert all(math.isfinite(n) for n in numbers), (table.title, row)
    # Both transports, side by side, at every rate and subscriber count
    transports = {row[0] for t in (report.tables[0], report.tables[2]) for row in t.rows}
    assert transports == {"table", "broadcast"}
    assert {what for what, *_ in report.headline} >= {
        "broadcast delivery lag p95, worst rate",
        "WAL per draft, table / broadcast, worst rate",
    }
