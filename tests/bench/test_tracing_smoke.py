"""The tracing bench in its smallest run: the traced stack, configured by the standard OTEL_*
variables alone, exports its spans over OTLP/HTTP. No timing is asserted; BENCHMARKS.md is
where the figures live."""

from __future__ import annotations

from bench.tracing import Collector, measure
from tests.databases import fresh_database, migrated_template, resolve_server_url


async def test_the_traced_stack_exports_over_otlp_and_the_other_does_not_trace() -> None:
    server = resolve_server_url()
    collector = Collector()
    async with migrated_template(server) as template, fresh_database(server, template) as url:
        table = await measure(url, runs=2, collector=collector)
    assert [row[0].split(" ")[0] for row in table.rows] == ["off", "on"]
    # The traced side's three turns (a warm-up, two runs) reached the collector as spans.
    assert collector.traces >= 1
    assert collector.bytes > 1000
