"""Run the reliability scenarios N times each and print the figures.

    python3 -m uv run python -m bench.reliability --runs 20

Uses DATABASE_URL's server, else an embedded Postgres; every run gets a fresh database.
Exits non-zero if any run lost or doubled anything.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from bench.stats import Table
from tests.databases import fresh_database, migrated_template, resolve_server_url
from tests.pg_servers import restartable_postgres
from tests.reliability.db_fault_scenarios import pgbouncer_run, postgres_restart_run
from tests.reliability.enqueued_scenarios import ENQUEUED_SCENARIOS
from tests.reliability.scenarios import SCENARIOS, Databases, Figures, Scenario

DB_FAULTS = ("postgres restart mid-run", "through pgbouncer (transaction)")


@dataclass
class Row:
    scenario: str
    runs: int = 0
    final_messages: int = 0
    duplicates: int = 0
    lost: int = 0
    max_executions: int = 0
    seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, figures: Sequence[Figures]) -> None:
        for f in figures:
            self.final_messages += f["final_messages"]
            self.duplicates += f["duplicates"]
            self.lost += f["lost"]
            self.max_executions = max(self.max_executions, f.get("max_executions", 0))
            self.seconds.append(f["seconds"])

    @property
    def clean(self) -> bool:
        return not (self.duplicates or self.lost or self.failures or self.max_executions > 1)


HEADER = ("scenario", "runs", "final msgs", "dups", "lost", "max exec/call", "p50 s")


def render(rows: Sequence[Row]) -> str:
    table = Table("Reliability", HEADER)
    for r in rows:
        p50 = statistics.median(r.seconds) if r.seconds else float("nan")
        table.add(
            r.scenario,
            r.runs,
            r.final_messages,
            r.duplicates,
            r.lost + len(r.failures),
            r.max_executions or "-",
            f"{p50:.2f}",
        )
    return table.render()


async def run_all(runs: int, only: Sequence[str] | None) -> list[Row]:
    server = resolve_server_url()
    rows: list[Row] = []
    async with migrated_template(server) as template, restartable_postgres() as restartable:

        def databases() -> AbstractAsyncContextManager[str]:
            return fresh_database(server, template)

        async def restart(_: Databases) -> list[Figures]:
            return [await postgres_restart_run(restartable)]

        async def bouncer(_: Databases) -> list[Figures]:
            return [await pgbouncer_run(server, template)]

        scenarios: dict[str, Scenario] = {
            **SCENARIOS,
            **ENQUEUED_SCENARIOS,
            DB_FAULTS[0]: restart,
            DB_FAULTS[1]: bouncer,
        }
        for name, scenario in scenarios.items():
            if only and name not in only:
                continue
            row = Row(name)
            rows.append(row)
            for i in range(runs):
                row.runs += 1
                started = time.perf_counter()
                try:
                    row.add(await scenario(databases))
                except Exception as exc:  # a run that blew up lost its turn: count it, go on
                    row.failures.append(f"run {i}: {exc!r}")
                print(
                    f"{name}: run {i + 1}/{runs} in {time.perf_counter() - started:.1f}s",
                    file=sys.stderr,
                )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--only", action="append", choices=[*SCENARIOS, *ENQUEUED_SCENARIOS, *DB_FAULTS]
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    rows = asyncio.run(run_all(args.runs, args.only))
    print(render(rows))
    for row in rows:
        for failure in row.failures:
            print(f"{row.scenario}: {failure}", file=sys.stderr)
    return 0 if all(r.clean for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
