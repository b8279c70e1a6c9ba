"""OpenTelemetry traces and metrics: one trace per turn, across the quick path and the background.

Off unless configured. Without an OTLP endpoint in the standard variables
(`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
`..._METRICS_ENDPOINT`), the API's no-op providers make every span and instrument below free
(bench/tracing.py measures it). With one, `setup_telemetry` installs the SDK: spans and metrics
go out over OTLP/HTTP, configured by the other `OTEL_*` variables as usual (service name,
headers, sampler, export interval). `handoff dev` installs it in any case, to keep the latest
turns' spans in memory for its page's timeline (devkit/timeline.py).

The trace crosses the Inngest boundary in the turn itself (`Turn.trace`, W3C trace context):
the handoff event's data and the job row both carry it, so every step of the background run,
a retry's and a dashboard replay's included, joins the trace its request began.

Spans follow OpenTelemetry's GenAI conventions where they apply (`invoke_agent handoff` for a
turn, `chat <model>` for a model call, `execute_tool <name>` for a tool call), plus the
product's own (`load history`, `persist`, `handoff`, `claim`, `model round`, `finalize`).

On Lambda the platform may freeze the process once a response ends, so each entry flushes
before its response does (`flush`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    # The SDK is imported by `setup_telemetry` only: a process that traces nothing (a cold
    # start without OTEL_* variables) loads the API alone.
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

# The instrumentation scope of the product's own spans and metrics (libraries that trace their
# work, FastAPI's per-request spans among them, use the same SDK under scopes of their own).
SCOPE = "handoff"
tracer = trace.get_tracer(SCOPE)
# W3C trace context, by itself: `opentelemetry.propagate` would read OTEL_PROPAGATORS through
# package entry points, tens of milliseconds of a cold start.
_W3C = TraceContextTextMapPropagator()
meter = metrics.get_meter(SCOPE)

SECONDS_FAST = (0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
SECONDS_SLOW = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
TOKENS = tuple(float(4**i) for i in range(1, 12))  # 4 … 4,194,304: the GenAI advice
COUNTS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0)

FIRST_TOKEN = meter.create_histogram(
    "handoff.turn.first_token",
    unit="s",
    description="From the respond request to its first token.",
    explicit_bucket_boundaries_advisory=SECONDS_FAST,
)
HANDOFF_LATENCY = meter.create_histogram(
    "handoff.turn.handoff_latency",
    unit="s",
    description="From the respond request to its turn's handoff event sent.",
    explicit_bucket_boundaries_advisory=SECONDS_FAST,
)
RESUME_OVERHEAD = meter.create_histogram(
    "handoff.job.resume_overhead",
    unit="s",
    description="From the handoff event sent to its job claimed in the background.",
    explicit_bucket_boundaries_advisory=SECONDS_FAST,
)
JOB_DURATION = meter.create_histogram(
    "handoff.job.duration",
    unit="s",
    description="From a background job's request to its end, by outcome.",
    explicit_bucket_boundaries_advisory=SECONDS_SLOW,
)
TURNS = meter.create_counter(
    "handoff.turns",
    unit="{turn}",
    description="Turns that ended, by outcome (completed, error, canceled, interrupted) and path.",
)
TOOL_CALLS = meter.create_counter(
    "handoff.tool_calls", unit="{call}", description="Tool calls run, by tool and status."
)
DRAFT_WRITES = meter.create_histogram(
    "handoff.draft.writes",
    unit="{write}",
    description="Draft writes of one message by one writer (a quick path or a round).",
    explicit_bucket_boundaries_advisory=COUNTS,
)
TOKEN_USAGE = meter.create_histogram(
    "gen_ai.client.token.usage",
    unit="{token}",
    description="Tokens per model call, by type and model.",
    explicit_bucket_boundaries_advisory=TOKENS,
)
OPERATION_DURATION = meter.create_histogram(
    "gen_ai.client.operation.duration",
    unit="s",
    description="One model call, streamed to its end.",
    explicit_bucket_boundaries_advisory=SECONDS_SLOW,
)

_ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
_providers: tuple[TracerProvider, MeterProvider] | None = None


def enabled() -> bool:
    """True once `setup_telemetry` installed the SDK: worth computing what only it records."""
    return _providers is not None


def exporting() -> bool:
    """True when the environment names an OTLP endpoint."""
    return any(os.environ.get(name) for name in _ENDPOINTS)


def setup_telemetry(
    *extra_processors: SpanProcessor, metric_readers: Sequence[MetricReader] = ()
) -> bool:
    """Install the SDK once per process: OTLP exporters when `exporting()`, plus
    `extra_processors` (development's in-memory timeline) and `metric_readers`. False when it
    stays off."""
    global _providers
    if _providers is not None:
        if metric_readers:
            raise RuntimeError("metric readers can only be added with the first setup")
        for processor in extra_processors:
            _providers[0].add_span_processor(processor)
        return True
    if not exporting() and not extra_processors and not metric_readers:
        return False
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "handoff")})
    tracing = TracerProvider(resource=resource)
    readers = list(metric_readers)
    if exporting():
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracing.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    for processor in extra_processors:
        tracing.add_span_processor(processor)
    measuring = MeterProvider(resource=resource, metric_readers=readers)
    trace.set_tracer_provider(tracing)
    metrics.set_meter_provider(measuring)
    _providers = (tracing, measuring)
    return True


def flush() -> None:
    """Export what is pending now (blocking): before a Lambda response ends."""
    if _providers is not None:
        _providers[0].force_flush()
        _providers[1].force_flush()


async def flush_on_lambda() -> None:
    """`flush`, off the event loop, when running on Lambda (elsewhere the exporters' own
    threads keep up)."""
    if _providers is not None and os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        await asyncio.to_thread(flush)


def carrier(span: trace.Span | None = None) -> dict[str, str]:
    """The W3C trace context of `span` (default: the current one), to travel with a turn."""
    ctx = trace.set_span_in_context(span) if span is not None else None
    carried: dict[str, str] = {}
    _W3C.inject(carried, context=ctx)
    return carried


def context_of(carried: Mapping[str, str] | None) -> otel_context.Context:
    """The context a turn's carrier names (an empty one without it)."""
    return _W3C.extract(dict(carried or {}))


def model_attributes(model: str) -> dict[str, str]:
    """GenAI attributes of a `provider:model` (or `scripted`) model name."""
    provider, _, name = model.partition(":")
    return {
        "gen_ai.provider.name": provider if name else model,
        "gen_ai.request.model": name or model,
    }


def record_usage(model: str, usage: Mapping[str, Any] | None, seconds: float) -> None:
    """One model call's tokens and duration, as the GenAI metrics count them."""
    attributes = {"gen_ai.operation.name": "chat", **model_attributes(model)}
    OPERATION_DURATION.record(seconds, attributes)
    for kind, key in (("input", "input_tokens"), ("output", "output_tokens")):
        if usage and isinstance(usage.get(key), int):
            TOKEN_USAGE.record(usage[key], {**attributes, "gen_ai.token.type": kind})


def turn_ended(outcome: str, *, quick: bool, seconds: float | None = None, count: int = 1) -> None:
    """Count turns that ended as `outcome`, and a background job's `seconds` from its request.
    Called by the job's transition, which happens once whatever retries and replays do."""
    attributes = {"handoff.outcome": outcome, "handoff.path": "quick" if quick else "background"}
    TURNS.add(count, attributes)
    if not quick and seconds is not None:
        JOB_DURATION.record(seconds, attributes)


def since(started: float) -> float:
    """Seconds since `started` (time.perf_counter())."""
    return time.perf_counter() - started
