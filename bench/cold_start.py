"""Import time of the Lambda entry modules against importing every runtime dependency, and
the first token of a cold respond process against a warm one.

    python3 -m uv run python -m bench.cold_start --runs 7 --first-token-runs 3

Measured in `.bench/runtime`, a virtualenv with the runtime dependencies only (as in the Lambda
artefacts), made on first use: development tools change what imports (httpx loads its command
line, with rich and pygments, when they are installed). Each figure is the median over fresh
interpreters of the total `python -X importtime` reports (every module's own import time,
summed), and the interpreter's wall time. Then the same for both entries imported from their
built artefacts by an interpreter that sees nothing else and writes no bytecode, as on Lambda:
with the bytecode the zips ship, and with it removed (the zips before). The first-token figures
come from the built respond artefact, started as the Lambda Web Adapter starts it
(bench/cold_first_token.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.cold_first_token import Tasks

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_VENV = ROOT / ".bench" / "runtime"
SIGNING_KEY = "signkey-prod-" + "0" * 64

# The runtime dependencies (pyproject.toml), all at once. Namespace packages (langgraph,
# langchain_core) import next to nothing by their name: their working modules are named.
EVERY_DEPENDENCY = (
    "boto3, fastapi, httpx, inngest, inngest.fast_api, jcs, jwt, langchain, "
    "langchain.chat_models, langchain_core.messages, langchain_core.runnables, "
    "langchain_core.tools, langgraph.graph, langgraph.prebuilt, "
    "langgraph.checkpoint.postgres.aio, mangum, psycopg, psycopg_pool, pydantic, "
    "pydantic_settings, supabase, uvicorn"
)
CASES = {
    "respond entry (handlers.lambda_respond)": "import handlers.lambda_respond",
    "respond entry + boto3 (SSM configured)": "import boto3; import handlers.lambda_respond",
    "inngest entry (functions.lambda_inngest)": "import functions.lambda_inngest",
    "every runtime dependency": f"import {EVERY_DEPENDENCY}",
    "python -c pass (the floor)": "pass",
}
ENTRIES = {"respond": "handlers.lambda_respond", "inngest": "functions.lambda_inngest"}
_LINE = re.compile(r"import time:\s+(\d+) \|")


def runtime_python() -> Path:
    """The interpreter of a virtualenv holding the locked runtime dependencies, and no others."""
    python = RUNTIME_VENV / "bin" / "python"
    if python.exists():
        return python
    # `uv run` names its own binary in UV.
    uv = [os.environ.get("UV") or shutil.which("uv") or "uv"]
    requirements = subprocess.run(  # noqa: S603 - uv with literal arguments
        [*uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "-q"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    subprocess.run([*uv, "venv", "-q", str(RUNTIME_VENV)], check=True)  # noqa: S603
    subprocess.run(  # noqa: S603
        [*uv, "pip", "install", "-q", "-p", str(python), "-r", "-"],
        input=requirements,
        check=True,
        text=True,
    )
    return python


def measure(python: Path, code: str, cwd: Path = ROOT, *flags: str) -> tuple[float, float]:
    """(importtime total in ms, wall time in ms) for one fresh interpreter in `cwd`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSM_", "AWS_"))}
    env |= {
        "DATABASE_URL": "postgresql://unused@127.0.0.1:1/none",
        "SUPABASE_JWT_SECRET": "unused",
        "INNGEST_SIGNING_KEY": SIGNING_KEY,
    }
    started = time.perf_counter()
    out = subprocess.run(  # noqa: S603 - our own interpreter and a literal program
        [str(python), *flags, "-X", "importtime", "-c", code],
        env=env,
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    wall = (time.perf_counter() - started) * 1000
    total = sum(int(m.group(1)) for m in _LINE.finditer(out.stderr)) / 1000
    return total, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--first-token-runs", type=int, default=3, help="cold respond processes (0: none)"
    )
    args = parser.parse_args()
    print_import_times(args.runs)
    # Imported here: the import figures above need none of the stack's modules.
    from bench import cold_first_token

    with cold_first_token.built_tasks(("respond", "inngest")) as tasks:
        print()
        print_artefact_import_times(args.runs, tasks)
        if args.first_token_runs:
            logging.basicConfig(level=logging.CRITICAL)
            figures = asyncio.run(cold_first_token.measure(args.first_token_runs, tasks))
            print()
            print(cold_first_token.render(figures, args.first_token_runs))


def print_artefact_import_times(runs: int, tasks: Tasks) -> None:
    """Each entry's import from its unzipped artefact, with and without the shipped bytecode."""
    python = tasks.bare_python / "python"
    kinds = {"bytecode shipped": tasks.shipped, "no bytecode": tasks.sources_only}
    cases = {
        f"{name} entry ({entry}), {kind}": (f"import {entry}", roots[name])
        for name, entry in ENTRIES.items()
        for kind, roots in kinds.items()
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (code, task) in cases.items():
            # -B: Lambda's task root is read-only, so nothing compiled is kept for the next run.
            results[name].append(measure(python, code, task, "-B"))
    print(f"| import from the built artefact (median of {runs}) | importtime total ms | wall ms |")
    print("|---|---:|---:|")
    for name, figures in results.items():
        total = statistics.median(t for t, _ in figures)
        wall = statistics.median(w for _, w in figures)
        print(f"| {name} | {total:,.0f} | {wall:,.0f} |")


def print_import_times(runs: int) -> None:
    python = runtime_python()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    # Interleaved, so a burst of noise on the machine hits every case alike.
    for _ in range(runs):
        for name, code in CASES.items():
            results[name].append(measure(python, code))
    baseline = statistics.median(t for t, _ in results["every runtime dependency"])
    print(f"| imports (median of {runs}) | importtime total ms | wall ms | vs every dep |")
    print("|---|---:|---:|---:|")
    for name, figures in results.items():
        total = statistics.median(t for t, _ in figures)
        wall = statistics.median(w for _, w in figures)
        print(f"| {name} | {total:,.0f} | {wall:,.0f} | {total / baseline:.2f} |")


if __name__ == "__main__":
    main()
