"""What the timeline keeps of a trace, bounded, and the waterfall it shows of one; no I/O.

Of each trace at most `max_spans` spans: past that, a span that frames others or says something
(the turn, a step, a round, a model call) takes the place of the latest kept one that does
neither, so that a long turn still shows its steps; the others are counted, not kept.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SpanRecord:
    """What the timeline keeps of an ended span."""

    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    error: str | None  # what the span's status says of its failure; None when it did not fail
    attributes: dict[str, str | int | float | bool]
    turn: bool  # the turn's span or a step's: it carries the reply's message id


@dataclass
class Trace:
    spans: list[SpanRecord] = field(default_factory=list)
    # How many kept spans each span is the parent of.
    children: Counter[int] = field(default_factory=Counter)
    dropped: int = 0
    running: int = 0  # spans started and not ended yet
    message_ids: set[str] = field(default_factory=set)

    def keep(self, record: SpanRecord, max_spans: int) -> None:
        if len(self.spans) >= max_spans:
            self.dropped += 1
            if not self._notable(record):
                return
            leaf = next(
                (i for i in reversed(range(len(self.spans))) if not self._notable(self.spans[i])),
                None,
            )
            if leaf is None:
                return
            gone = self.spans.pop(leaf)
            if gone.parent_id is not None:
                self.children[gone.parent_id] -= 1
        self.spans.append(record)
        if record.parent_id is not None:
            self.children[record.parent_id] += 1

    def _notable(self, record: SpanRecord) -> bool:
        # Children end before their parent: a span's kept children are known when it ends.
        return record.turn or bool(record.attributes) or self.children[record.span_id] > 0


@dataclass(frozen=True)
class Row:
    """A span as the waterfall shows it."""

    span: SpanRecord
    depth: int
    parent_id: int | None  # None when the parent is not in the timeline (the trace's roots)
    start_ms: float
    duration_ms: float


@dataclass(frozen=True)
class TraceView:
    trace_id: int
    rows: list[Row]
    duration_ms: float
    dropped: int
    running: int


def trace_view(trace_id: int, spans: list[SpanRecord], dropped: int, running: int) -> TraceView:
    by_id = {span.span_id: span for span in spans}
    depths: dict[int, int] = {}

    def depth(span: SpanRecord) -> int:
        if span.span_id not in depths:
            parent = by_id.get(span.parent_id) if span.parent_id is not None else None
            depths[span.span_id] = 0 if parent is None else depth(parent) + 1
        return depths[span.span_id]

    ordered = sorted(spans, key=lambda s: (s.start_ns, depth(s), s.end_ns))
    origin = ordered[0].start_ns
    rows = [
        Row(
            span=span,
            depth=depth(span),
            parent_id=span.parent_id if span.parent_id in by_id else None,
            start_ms=_ms(span.start_ns - origin),
            duration_ms=_ms(span.end_ns - span.start_ns),
        )
        for span in ordered
    ]
    end = max(span.end_ns for span in spans)
    return TraceView(trace_id, rows, _ms(end - origin), dropped, running)


def _ms(nanoseconds: int) -> float:
    return round(nanoseconds / 1e6, 3)
