"""The provider bench in its smallest run: both providers answer through both sides. No timing
is asserted; BENCHMARKS.md is where the figures live."""

from __future__ import annotations

import math

from bench.providers import measure
from tests.databases import fresh_database, migrated_template, resolve_server_url


async def test_both_providers_stream_a_first_token_on_both_sides() -> None:
    server = resolve_server_url()
    async with migrated_template(server) as template, fresh_database(server, template) as url:
        table = await measure(url, runs=2)
    assert [row[0] for row in table.rows] == ["openai", "anthropic"]
    for row in table.rows:
        # direct and Handoff first tokens wait for the provider's first chunk (200 ms)
        direct, handoff = float(row[2]), float(row[3])
        assert direct >= 200
        assert handoff >= 200
        assert all(math.isfinite(float(cell)) for cell in row[1:])
