"""Import time of the Lambda entry modules against importing every runtime dependency, and
the first token of a cold respond process against a warm one.

    python3 -m uv run python -m bench.cold_start --runs 7 --first-token-runs 3

What is counted. "wall" is a fresh interpreter's time from its process's start (the moment the
bench starts it) to the entry imported, which is when the entry's app is built and could serve:
the program ends right there with `os._exit`, so the interpreter's teardown (freeing every
object at exit, about 0.4 s for an entry's 130,000) is not counted, as Lambda never pays it
before serving. That run has no `-X importtime`, which slows what it reports. A second run of
each case with `-X importtime` gives the importtime total (every module's own import time,
summed) and "old wall": that run's whole process, exit included, the "wall" this bench
reported before. Each figure is the median over fresh interpreters, the cases interleaved.

With bytecode, as every installed virtualenv and both Lambda zips have it. The first table is
measured in `.bench/runtime`, a virtualenv with the runtime dependencies only (as in the
artefacts: development tools change what imports), made on first use with its bytecode
compiled; a first, unmeasured run of each case compiles the project's own modules (and
anything else missing) as any first run would. Measured runs write nothing. The "no bytecode"
rows are this venv as it was measured before (installed without bytecode, in an environment
with PYTHONDONTWRITEBYTECODE set, so every run compiled every module but the standard
library's): they read bytecode from a cache (PYTHONPYCACHEPREFIX) holding the standard
library's only.

Then both entries imported from their built artefacts by an interpreter that sees nothing else
and writes no bytecode, as on Lambda: with the bytecode the zips ship, and with it removed (the
zips before). The first-token figures come from the built respond artefact, started as the
Lambda Web Adapter starts it (bench/cold_first_token.py): from the process's start, so neither
counts a teardown either.
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
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.cold_first_token import Tasks

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_VENV = ROOT / ".bench" / "runtime"
# PYTHONPYCACHEPREFIX of the "no bytecode" rows: the standard library's bytecode, and no other.
STDLIB_BYTECODE_ONLY = ROOT / ".bench" / "stdlib-bytecode-only"
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
ENTRIES = {"respond": "handlers.lambda_respond", "inngest": "functions.lambda_inngest"}
CASES = {
    "respond entry (handlers.lambda_respond)": "import handlers.lambda_respond",
    "respond entry + boto3 (SSM configured)": "import boto3; import handlers.lambda_respond",
    "inngest entry (functions.lambda_inngest)": "import functions.lambda_inngest",
    "every runtime dependency": f"import {EVERY_DEPENDENCY}",
    "python -c pass (the floor)": "pass",
}
NO_BYTECODE_CASES = {
    f"{name} entry ({entry}), no bytecode (as measured before)": f"import {entry}"
    for name, entry in ENTRIES.items()
}
# Prints when the program gets there, on the clock every process shares (CLOCK_MONOTONIC), and
# leaves at once: what the interpreter does at exit is not part of a cold start.
_TIMED = "import os, sys, time\n{code}\nsys.stdout.write(repr(time.perf_counter()))\n"
_TIMED += "sys.stdout.flush()\nos._exit(0)"
_LINE = re.compile(r"import time:\s+(\d+) \|")


@dataclass(frozen=True)
class Run:
    """One case in fresh interpreters, in ms (the module docstring says what each counts)."""

    wall: float
    importtime: float
    old_wall: float


def runtime_python() -> Path:
    """The interpreter of a virtualenv holding the locked runtime dependencies, and no others,
    with their bytecode."""
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
        [*uv, "pip", "install", "-q", "--compile-bytecode", "-p", str(python), "-r", "-"],
        input=requirements,
        check=True,
        text=True,
    )
    return python


def _environment(**extra: str) -> dict[str, str]:
    """Env-only settings (no SSM), writing no bytecode unless `extra` unsets that with ''."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSM_", "AWS_"))}
    env.pop("PYTHONPYCACHEPREFIX", None)
    env |= {
        "DATABASE_URL": "postgresql://unused@127.0.0.1:1/none",
        "SUPABASE_JWT_SECRET": "unused",
        "INNGEST_SIGNING_KEY": SIGNING_KEY,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env |= extra
    return {k: v for k, v in env.items() if v}


def measure(
    python: Path, code: str, cwd: Path = ROOT, *flags: str, env: dict[str, str] | None = None
) -> Run:
    """`code` in two fresh interpreters in `cwd`: timed to its end, then under importtime."""
    env = _environment() if env is None else env
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own interpreter and a literal program
        [str(python), *flags, "-c", _TIMED.format(code=code)],
        env=env,
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    wall = (float(done.stdout) - started) * 1000
    started = time.perf_counter()
    out = subprocess.run(  # noqa: S603
        [str(python), *flags, "-X", "importtime", "-c", code],
        env=env,
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    old_wall = (time.perf_counter() - started) * 1000
    importtime = sum(int(m.group(1)) for m in _LINE.finditer(out.stderr)) / 1000
    return Run(wall, importtime, old_wall)


def prepare_bytecode(python: Path) -> None:
    """Each case run once with bytecode written (the project's modules, and whatever the venv
    lacks), and the no-bytecode rows' cache: those runs' bytecode, less all but the standard
    library's (the venv and the project are both under ROOT)."""
    for code in CASES.values():
        subprocess.run(  # noqa: S603
            [str(python), "-c", code],
            env=_environment(PYTHONDONTWRITEBYTECODE=""),
            cwd=ROOT,
            check=True,
        )
    shutil.rmtree(STDLIB_BYTECODE_ONLY, ignore_errors=True)
    writing = _environment(
        PYTHONDONTWRITEBYTECODE="", PYTHONPYCACHEPREFIX=str(STDLIB_BYTECODE_ONLY)
    )
    for code in NO_BYTECODE_CASES.values():
        subprocess.run([str(python), "-c", code], env=writing, cwd=ROOT, check=True)  # noqa: S603
    shutil.rmtree(STDLIB_BYTECODE_ONLY / ROOT.relative_to(ROOT.anchor))


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
    results: dict[str, list[Run]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (code, task) in cases.items():
            # -B: Lambda's task root is read-only, so nothing compiled is kept for the next run.
            results[name].append(measure(python, code, task, "-B"))
    print(_header(f"import from the built artefact (median of {runs})"))
    for name, figures in results.items():
        print(_row(name, figures))


def print_import_times(runs: int) -> None:
    python = runtime_python()
    prepare_bytecode(python)
    no_bytecode = _environment(PYTHONPYCACHEPREFIX=str(STDLIB_BYTECODE_ONLY))
    cases: dict[str, tuple[str, dict[str, str] | None]]
    cases = {name: (code, None) for name, code in CASES.items()}
    cases |= {name: (code, no_bytecode) for name, code in NO_BYTECODE_CASES.items()}
    results: dict[str, list[Run]] = {name: [] for name in cases}
    # Interleaved, so a burst of noise on the machine hits every case alike.
    for _ in range(runs):
        for name, (code, env) in cases.items():
            results[name].append(measure(python, code, env=env))
    baseline = statistics.median(r.wall for r in results["every runtime dependency"])
    print(_header(f"imports in .bench/runtime (median of {runs})", "wall vs every dep"))
    for name, figures in results.items():
        wall = statistics.median(r.wall for r in figures)
        print(_row(name, figures, f"{wall / baseline:.2f}"))


def _header(title: str, *extra: str) -> str:
    columns = ["wall ms", "importtime total ms", "old wall ms (importtime on, to exit)", *extra]
    return f"| {title} | {' | '.join(columns)} |\n|---|{'---:|' * len(columns)}"


def _row(name: str, runs: list[Run], *extra: str) -> str:
    figures = (statistics.median(column) for column in zip(*map(astuple, runs), strict=True))
    return f"| {name} | {' | '.join([*(f'{v:,.0f}' for v in figures), *extra])} |"


if __name__ == "__main__":
    main()
