"""Percentiles and the Markdown tables the speed bench prints."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between closest ranks; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def p95(values: Sequence[float]) -> float:
    return percentile(values, 95)


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


def ratio(a: float, b: float) -> str:
    if math.isnan(a) or math.isnan(b) or b == 0:
        return "-"
    return f"{a / b:.2f}x"


@dataclass
class Table:
    """One section of the report: a title, a header, rows of cells and notes under it."""

    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.header):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.header)} columns")
        self.rows.append(tuple(str(c) for c in cells))

    def render(self) -> str:
        lines = [self.header, *self.rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(self.header))]
        out = [f"### {self.title}", ""]
        for n, line in enumerate(lines):
            cells = [
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            ]
            out.append("| " + " | ".join(cells) + " |")
            if n == 0:
                out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        if self.notes:
            out.append("")
            out.extend(self.notes)
        return "\n".join(out)
