"""The OpenTelemetry SDK as the tests read it, installed once per process (the providers are
global, and `setup_telemetry` takes metric readers only the first time): an in-memory span
exporter, a metric reader, and development's timeline (devkit/timeline.py)."""

from __future__ import annotations

from opentelemetry.sdk.metrics import Counter, Histogram
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from devkit.timeline import Timeline
from infra import telemetry

EXPORTER = InMemorySpanExporter()
# Delta: each read holds what was recorded since the one before, so a test reads its own.
READER = InMemoryMetricReader(
    preferred_temporality={
        Counter: AggregationTemporality.DELTA,
        Histogram: AggregationTemporality.DELTA,
    }
)
TIMELINE = Timeline()


def install_sdk() -> None:
    """The SDK, with all three, from the first call in this process on."""
    if not telemetry.enabled():
        telemetry.setup_telemetry(SimpleSpanProcessor(EXPORTER), TIMELINE, metric_readers=[READER])
