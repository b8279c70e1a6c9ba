"""A reply's timeline in development: the last turns' traces, kept in memory for the chat page.

`handoff dev` installs a `Timeline`, an OpenTelemetry SDK span processor, when it starts
(`infra.telemetry.setup_telemetry(timeline)`; when OTEL_* variables name an OTLP endpoint, the
spans are exported as well). Only `handoff dev` does, not `create_dev_app`: the SDK's provider
is global, and the in-process stacks of the tests and benchmarks must not each install one.

What it keeps, bounded:

- the product's own spans only (the `handoff` scope): FastAPI traces every request by itself
  once the SDK is installed, each request and each Inngest call a trace of its own, which would
  push the turns out;
- the last `MAX_TRACES` (200) traces, the least recently active one going first;
- at most `MAX_SPANS` (500) spans of each. Past that, a span that frames others or says
  something (the turn, a step, a round, a model call) takes the place of the latest kept one that
  does neither (a draft write, say), so that a long turn still shows its steps; the others are
  counted, not kept;
- of each span its name, parent, times, whether it failed, and a few attributes (attempt, tool,
  model, round, token usage), not the SDK's whole record.

A trace is found by the reply it answers: the turn's span (`invoke_agent handoff`) and every
background step carry `handoff.message.id`. A span is kept once it ends, so a turn still
running shows what has ended so far, and how many of its spans have started and not ended.

`GET /api/dev/messages/{messageId}/timeline` serves one: the spans in start order, with their
start offset and duration in milliseconds from the trace's first span, their depth and parent.
A trace's bounded record and its waterfall are devkit/traces.py's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from uuid import UUID

from fastapi import APIRouter, FastAPI, Request
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from devkit.traces import Row, SpanRecord, Trace, TraceView, trace_view
from handlers.deps import CurrentUser, ServicesDep
from handlers.error_responses import ERROR_RESPONSES
from handlers.errors import ApiError
from infra import telemetry
from infra.store import messages
from infra.store.ids import MessageId

MAX_TRACES = 200
MAX_SPANS = 500
MESSAGE_ID = "handoff.message.id"
# The attributes a row shows, by the name the route gives them.
KEPT: dict[str, str] = {
    "handoff.attempt": "attempt",
    "gen_ai.tool.name": "tool",
    "gen_ai.request.model": "model",
    "handoff.round": "round",
    "gen_ai.usage.input_tokens": "input_tokens",
    "gen_ai.usage.output_tokens": "output_tokens",
}


class Timeline(SpanProcessor):
    """The last `max_traces` traces of the `handoff` scope, at most `max_spans` spans each,
    found by the message id their spans carry. Thread-safe: spans may end on any thread."""

    def __init__(self, max_traces: int = MAX_TRACES, max_spans: int = MAX_SPANS) -> None:
        self.max_traces = max_traces
        self.max_spans = max_spans
        self._lock = threading.Lock()
        self._traces: OrderedDict[int, Trace] = OrderedDict()
        self._by_message: dict[str, int] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not _ours(span) or span.context is None:
            return
        message_id = (span.attributes or {}).get(MESSAGE_ID)
        with self._lock:
            kept = self._touch(span.context.trace_id)
            kept.running += 1
            # Indexed as soon as a span of the turn starts: the quick path's spans end before
            # its own, and they are the turn's from the start.
            if isinstance(message_id, str):
                kept.message_ids.add(message_id)
                self._by_message[message_id] = span.context.trace_id

    def on_end(self, span: ReadableSpan) -> None:
        record = _record(span) if _ours(span) else None
        if record is None or span.context is None:
            return
        with self._lock:
            kept = self._touch(span.context.trace_id)
            kept.running = max(0, kept.running - 1)
            kept.keep(record, self.max_spans)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def view(self, message_id: str) -> TraceView | None:
        """The trace of the reply `message_id`, or None when none of its spans has ended here
        (not yet, or no longer)."""
        with self._lock:
            trace_id = self._by_message.get(message_id)
            kept = self._traces.get(trace_id) if trace_id is not None else None
            if trace_id is None or kept is None or not kept.spans:
                return None
            spans, dropped, running = list(kept.spans), kept.dropped, kept.running
        return trace_view(trace_id, spans, dropped, running)

    def _touch(self, trace_id: int) -> Trace:
        """The trace's entry, the most recent now; the oldest goes when there are too many."""
        kept = self._traces.get(trace_id)
        if kept is not None:
            self._traces.move_to_end(trace_id)
            return kept
        kept = self._traces[trace_id] = Trace()
        while len(self._traces) > self.max_traces:
            gone_id, gone = self._traces.popitem(last=False)
            for message_id in gone.message_ids:
                if self._by_message.get(message_id) == gone_id:
                    del self._by_message[message_id]
        return kept


def _ours(span: ReadableSpan) -> bool:
    scope = span.instrumentation_scope
    return scope is not None and scope.name == telemetry.SCOPE


def _record(span: ReadableSpan) -> SpanRecord | None:
    if span.context is None or span.start_time is None or span.end_time is None:
        return None
    attributes = span.attributes or {}
    error = None
    if span.status.status_code is StatusCode.ERROR:
        error = span.status.description or "failed"
    return SpanRecord(
        span_id=span.context.span_id,
        parent_id=span.parent.span_id if span.parent is not None else None,
        name=span.name,
        start_ns=span.start_time,
        end_ns=span.end_time,
        error=error,
        attributes={
            shown: value
            for key, shown in KEPT.items()
            if isinstance(value := attributes.get(key), str | int | float | bool)
        },
        turn=isinstance(attributes.get(MESSAGE_ID), str),
    )


# ---------------------------------------------------------------------------------------------
# The route


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class TimelineSpan(_Camel):
    name: str
    span_id: str
    parent_id: str | None  # None for the trace's first span (and any whose parent is not kept)
    depth: int
    start_ms: float  # from the trace's first span
    duration_ms: float
    error: str | None  # the failure, as the span's status says it; None when it did not fail
    attempt: int | None = None  # a background step's: 0 first, 1 its first retry…
    tool: str | None = None
    model: str | None = None
    round: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


class TimelineBody(_Camel):
    message_id: UUID
    trace_id: str
    duration_ms: float  # from the first span's start to the last one's end
    spans: list[TimelineSpan]
    dropped_spans: int  # spans past the per-trace bound, not shown
    running_spans: int  # spans that started and have not ended yet: the turn goes on


router = APIRouter()


def install(app: FastAPI, timeline: Timeline | None) -> None:
    """Serve `timeline`'s traces on `app` (without one, the route says none are kept)."""
    app.state.timeline = timeline
    app.include_router(router)


@router.get(
    "/api/dev/messages/{message_id}/timeline",
    response_model=TimelineBody,
    response_model_by_alias=True,
    responses={401: ERROR_RESPONSES[401], 404: ERROR_RESPONSES[404]},
)
async def timeline(
    message_id: UUID, user: CurrentUser, services: ServicesDep, request: Request
) -> TimelineBody:
    """The trace of a reply of the caller's, from this server's memory."""
    if not await messages.visible(await services.pool(), user.claims, MessageId(message_id)):
        raise ApiError(404, "message_not_found", "No such message of yours.")
    kept: Timeline | None = getattr(request.app.state, "timeline", None)
    if kept is None:
        raise ApiError(404, "timeline_not_found", "This server keeps no timelines.")
    view = kept.view(str(message_id))
    if view is None:
        raise ApiError(
            404,
            "timeline_not_found",
            "This reply's timeline is not in memory (not yet, or no longer): handoff dev keeps"
            f" the traces of its last {kept.max_traces} turns.",
        )
    return TimelineBody(
        message_id=message_id,
        trace_id=f"{view.trace_id:032x}",
        duration_ms=view.duration_ms,
        spans=[_span(row) for row in view.rows],
        dropped_spans=view.dropped,
        running_spans=view.running,
    )


def _span(row: Row) -> TimelineSpan:
    return TimelineSpan.model_validate(
        {
            "name": row.span.name,
            "span_id": f"{row.span.span_id:016x}",
            "parent_id": f"{row.parent_id:016x}" if row.parent_id is not None else None,
            "depth": row.depth,
            "start_ms": row.start_ms,
            "duration_ms": row.duration_ms,
            "error": row.span.error,
            **row.span.attributes,
        }
    )
