"""Speed, side by side: first token, the LangGraph server, handoff, Realtime fan-out, resume,
checkpoint growth and concurrency, as one Markdown report.

    python3 -m uv run python -m bench.speed            # the full run behind BENCHMARKS.md
    python3 -m uv run python -m bench.speed --quick    # seconds, not minutes; smaller samples

Uses DATABASE_URL's server, else an embedded Postgres; every section gets a fresh database.
The Realtime section needs wal_level=logical: without it, it starts a Postgres of its own.
The LangGraph server is installed on first use into .bench/ (skip it with --no-langgraph).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import platform
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from bench import background, growth, quick_path, realtime
from bench.stats import Table, ms, p50, p95, ratio
from tests.databases import fresh_database, migrated_template, resolve_server_url
from tests.support import fetch


@dataclass(frozen=True)
class Options:
    quick: bool = False
    langgraph: bool = True
    runs: int = 100  # first-token runs per side
    throughput_runs: int = 400
    clients: int = 20
    handoffs: int = 30
    stream_seconds: float = 4.0
    resumes: int = 30
    turns: int = 50
    chats: int = 50
    long_turns: int = 200  # how long the conversation whose history load is timed gets

    @classmethod
    def quick_run(cls, *, langgraph: bool = True) -> Options:
        return cls(True, langgraph, 5, 20, 20, 3, 0.5, 3, 5, 5, 12)


@dataclass
class Report:
    machine: list[str]
    tables: list[Table] = field(default_factory=list)
    headline: list[tuple[str, str, str, bool]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def check(self, what: str, value: str, target: str, ok: bool) -> None:
        self.headline.append((what, value, target, ok))

    def render(self) -> str:
        head = Table("Headline", ("figure", "measured", "target", "met"))
        for what, value, target, ok in self.headline:
            head.add(what, value, target, "yes" if ok else "NO")
        parts = ["\n".join(f"- {line}" for line in self.machine), head.render()]
        parts += [t.render() for t in self.tables]
        if self.errors:
            parts.append("Errors:\n" + "\n".join(f"- {e}" for e in self.errors))
        return "\n\n".join(parts) + "\n"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


async def machine(server_url: str) -> list[str]:
    cpu = _cpu()
    [pg] = await fetch(server_url, "select version()")
    return [
        f"machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        f"Python {platform.python_version()}; {pg['version'].split(' on ')[0]}",
    ]


@asynccontextmanager
async def database(server: str, template: str) -> AsyncIterator[str]:
    async with fresh_database(server, template) as url:
        yield url


async def first_token_sections(report: Report, url: str, o: Options) -> None:
    f = await quick_path.measure(
        url,
        runs=o.runs,
        throughput_runs=o.throughput_runs,
        clients=o.clients,
        handoffs=o.handoffs,
        langgraph=o.langgraph,
    )
    report.errors += f.errors
    ft = {side: (p50(v), p95(v), len(v)) for side, v in f.first_token.items()}
    floor, handoff = ft.get("floor", (math.nan,) * 3), ft.get("handoff", (math.nan,) * 3)
    t1 = Table(
        "1. First token: quick path against the floor",
        ("side", "runs", "p50 ms", "p95 ms", "p50 vs floor"),
    )
    names = {"floor": "floor (bare graph.astream)", "handoff": "Handoff quick path",
             "langgraph": "LangGraph server (langgraph dev)"}  # fmt: skip
    for side, (a, b, n) in ft.items():
        t1.add(names[side], n, ms(a), ms(b), ratio(a, floor[0]))
    idle = {side: (p50(v), p95(v), len(v)) for side, v in f.first_token_idle.items()}
    idle_floor = idle.get("floor", (math.nan,) * 3)
    for side, (a, b, n) in idle.items():
        t1.add(f"{names[side]}, each after 1 s idle", n, ms(a), ms(b), ratio(a, idle_floor[0]))
    t1.notes.append(
        "Back to back, the sides take turns; after 1 s idle, each run waits a second first, as a"
        " deployment does between a chat's messages. The quick path's Postgres runs on the same"
        " two cores here, and after a pause each round trip wakes a backend there."
    )
    report.tables.append(t1)
    r1 = handoff[0] / floor[0]
    report.check("first token p50, quick path / floor", f"{r1:.2f}x", "<= 1.5x", r1 <= 1.5)
    r1i = idle.get("handoff", (math.nan,))[0] / idle_floor[0]
    report.check("the same, each after 1 s idle", f"{r1i:.2f}x", "<= 1.5x", r1i <= 1.5)

    t2 = Table(
        "2. Against the LangGraph server", ("figure", "Handoff", "LangGraph server", "ratio")
    )
    lg = ft.get("langgraph")
    rps = f.runs_per_s
    if lg:
        t2.add("first token p50 ms", ms(handoff[0]), ms(lg[0]), ratio(lg[0], handoff[0]))
        t2.add("first token p95 ms", ms(handoff[1]), ms(lg[1]), ratio(lg[1], handoff[1]))
        r2 = lg[0] / handoff[0]
        report.check(
            "first token p50, LangGraph server / Handoff", f"{r2:.1f}x", ">= 10x", r2 >= 10
        )
    hr, lr = rps.get("handoff", math.nan), rps.get("langgraph", math.nan)
    t2.add(f"runs/s, {o.clients} clients", f"{hr:.1f}", f"{lr:.1f}" if lg else "-", ratio(hr, lr))
    t2.add(f"runs/s, {o.clients} clients, floor", f"{rps.get('floor', math.nan):.1f}", "", "")
    busy = {k: "-" if v is None else f"{100 * v:.0f}" for k, v in f.cores_busy.items()}
    t2.add("cores busy during runs/s, %", busy["handoff"], busy.get("langgraph", "-"), "")
    if lg:
        report.check("runs/s, Handoff / LangGraph server", f"{hr / lr:.1f}x", ">= 5x", hr / lr >= 5)
    t2.notes.append(
        "The in-memory runtime's queue sleeps 0.5 s between polls when no run is waiting "
        "(`langgraph_runtime_inmem.ops.Runs.next`); a run created while the worker sleeps "
        "waits for the next poll. Left as shipped. Its runs/s is set by those waits (the cores"
        " stay mostly idle), Handoff's by the machine: the ratio grows with the machine's speed."
    )
    report.tables.append(t2)

    t3 = Table(
        "3. Handoff latency: last token to `handoff` on the wire", ("runs", "p50 ms", "p95 ms")
    )
    t3.add(len(f.handoff), ms(p50(f.handoff)), ms(p95(f.handoff)))
    report.tables.append(t3)
    h = p50(f.handoff) * 1000
    report.check("handoff p50", f"{h:.1f} ms", "<= 15 ms", h <= 15)


async def realtime_section(report: Report, server: str, o: Options) -> None:
    async with (
        realtime.logical_server(server) as (logical, how),
        migrated_template(logical) as template,
        database(logical, template) as url,
    ):
        rows = await realtime.measure(url, seconds=o.stream_seconds)
    t = Table(
        "4. Realtime fan-out: change events per streaming message",
        ("writer", "tokens/s", "achieved", "events", "events/s", "max in 1 s",
         "lag p50 ms", "lag p95 ms", "final draft = content"),
    )  # fmt: skip
    for r in rows:
        t.add(
            "draft writer" if r.writer == "draft" else "naive (per token)", r.rate,
            f"{r.achieved_rate:.0f}", r.events, f"{r.per_s:.1f}", r.max_in_1s,
            ms(p50(r.lags)), ms(p95(r.lags)), "yes" if r.final_equal else "NO",
        )  # fmt: skip
    t.notes.append(f"Decoded with test_decoding on the {how}.")
    report.tables.append(t)
    drafts = [r for r in rows if r.writer == "draft"]
    # The busiest second is what a subscriber sees; an average over a short stream would count
    # the first write and the closing flush against a fraction of a second.
    worst = max(r.max_in_1s for r in drafts)
    lag = max(p95(r.lags) for r in drafts) * 1000
    report.check("draft events in the busiest second, worst rate", str(worst), "<= 5", worst <= 5)
    report.check("draft lag p95, worst rate", f"{lag:.0f} ms", "<= 300 ms", lag <= 300)
    same = all(r.final_equal for r in drafts)
    report.check("final draft equals final content", "yes" if same else "no", "yes", same)


async def background_sections(report: Report, server: str, template: str, o: Options) -> None:
    async with database(server, template) as url:
        resumes = await background.resume_overhead(url, o.resumes)
    t5 = Table(
        "5. Resume overhead: event accepted to first tool step started",
        ("runs", "p50 ms", "p95 ms"),
    )
    t5.add(len(resumes), ms(p50(resumes)), ms(p95(resumes)))
    report.tables.append(t5)

    await growth_section(report, server, template, o)

    async with database(server, template) as url:
        c = await background.whole_loop(url, o.chats)
    report.errors += c.errors
    t7 = Table(
        f"7. Concurrency: {o.chats} chats through the whole loop at once",
        ("chats", "completed", "pool size", "max connections", "p50 s", "p95 s"),
    )
    t7.add(c.chats, c.completed, c.pool_size, c.max_connections,
           f"{p50(c.seconds):.2f}", f"{p95(c.seconds):.2f}")  # fmt: skip
    report.tables.append(t7)
    ok = c.completed == c.chats and c.max_connections <= c.pool_size
    report.check(f"{o.chats} chats complete within the pool", f"{c.completed}/{c.chats}, "
                 f"{c.max_connections}/{c.pool_size} conns", "all, <= pool", ok)  # fmt: skip


# What a 50-turn conversation stored before checkpoints kept one checkpoint per run and list
# channels as deltas (BENCHMARKS.md, section 6): the total to stay under a third of.
GROWTH_BEFORE_50_TURNS = 597_756


async def growth_section(report: Report, server: str, template: str, o: Options) -> None:
    long_turns = max(o.turns, o.long_turns)
    async with database(server, template) as url:
        g = await growth.measure(url, long_turns, frozenset({10, long_turns}))
    rows = g.rows[: o.turns]
    t6 = Table(
        f"6. Checkpoint growth over a {o.turns}-turn conversation",
        ("turn", "bytes written", "thread total", "latest checkpoint", "checkpoint rows"),
    )
    shown = {1, 2, 5, *range(10, o.turns + 1, 10), o.turns}
    for r in rows:
        if r.turn in shown:
            t6.add(r.turn, r.written, r.total, r.latest, r.checkpoints)
    slope = growth.growth_per_turn(rows)
    first, last = g.at(10).load_s or math.nan, g.at(long_turns).load_s or math.nan
    t6.notes.append(
        f"Bytes written per turn grow by {slope:.1f} B each turn (least squares). Loading the "
        f"thread's latest checkpoint into memory takes {ms(first)} ms at turn 10 and "
        f"{ms(last)} ms at turn {long_turns} (p50 of 30)."
    )
    report.tables.append(t6)
    total = rows[-1].total
    if o.turns == 50:
        ok = total * 3 <= GROWTH_BEFORE_50_TURNS
        report.check("50-turn checkpoint total", f"{total / 1000:.0f} KB", "<= 199 KB", ok)
    if o.turns >= 20:  # over fewer turns the slope says more about the first turns' shape
        report.check("growth of bytes per turn", f"{slope:.1f} B/turn", "<= 10 B", slope <= 10)
    if long_turns < 50:  # a few turns apart, the load's growth is below the machine's noise
        return
    # What grows with the history is held to what the model request for it costs anyway
    # (docs/speed.md, "Where a history load goes").
    body = g.at(long_turns).body_s or math.nan
    report.check(
        f"history load growth, turn 10 to {long_turns}",
        f"{ms(first)} to {ms(last)} ms",
        f"<= the OpenAI request body of turn {long_turns} ({ms(body)} ms)",
        last - first <= body,
    )


async def run(options: Options) -> Report:
    server = resolve_server_url()
    report = Report(await machine(server))
    async with migrated_template(server) as template:
        async with database(server, template) as url:
            await first_token_sections(report, url, options)
        await realtime_section(report, server, options)
        await background_sections(report, server, template, options)
    report.tables.sort(key=lambda t: t.title)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small samples, for a smoke run")
    parser.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph server")
    parser.add_argument("--runs", type=int, help="first-token runs per side (default 100)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    langgraph = not args.no_langgraph
    options = Options.quick_run(langgraph=langgraph) if args.quick else Options(langgraph=langgraph)
    if args.runs:
        options = Options(**{**options.__dict__, "runs": args.runs})
    report = asyncio.run(run(options))
    print(report.render())
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
