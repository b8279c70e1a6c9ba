"""The first token of a cold respond process against a warm one, on the built artefact.

The respond artefact is built as `handoff package` builds it (for this machine's Python, and its
bytecode with it: Lambda's 3.12 need not be here), unzipped with its permission bits and started
by `handlers/run.sh` with an interpreter that sees nothing but the artefact, as the Lambda Web
Adapter starts it. Each run:

- cold: from the process's start, /healthz polled every 10 ms (the adapter's readiness check),
  then one reply asked for; the time to its first `token` event. With the bytecode the zip
  ships, and again with every `__pycache__` removed (the zips before they carried bytecode);
  both with `PYTHONDONTWRITEBYTECODE`, as on Lambda, whose read-only task root keeps none;
- warm: the same process's next reply, from its request to its first token.

Neither is SnapStart's restore, which only Lambda can measure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.sse import Stream, client, post_stream
from devkit.lambda_package import ARTEFACTS, build_artefacts
from devkit.packaged_assistants import assistants_code
from infra.settings import Settings
from tests.databases import fresh_database, migrated_template, resolve_server_url
from tests.support import JWT_SECRET, create_user_with_chat, token_for

ROOT = Path(__file__).resolve().parent.parent
READINESS_POLL_S = 0.01


@dataclass
class Figures:
    """Seconds, per run: start to ready, start to first token, a warm request's first token."""

    ready: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Tasks:
    """Each artefact unzipped, as shipped and without its bytecode, and a bare interpreter."""

    shipped: dict[str, Path]
    sources_only: dict[str, Path]
    bare_python: Path  # its bin directory


@contextmanager
def built_tasks(names: tuple[str, ...] = ("respond",)) -> Iterator[Tasks]:
    """The artefacts `names`, built and unzipped for this run."""
    uv = os.environ.get("UV") or shutil.which("uv") or "uv"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    with tempfile.TemporaryDirectory(prefix="handoff-cold-") as scratch:
        work = Path(scratch)
        built = build_artefacts(
            ROOT,
            work / "dist",
            assistants_code(Settings()),
            uv=uv,
            specs=tuple(spec for spec in ARTEFACTS if spec.name in names),
            python_version=version,
            compile_with=Path(sys.executable),
        )
        shipped, sources_only = {}, {}
        for artefact in built:
            shipped[artefact.name] = task = work / artefact.name
            with zipfile.ZipFile(artefact.path) as archive:
                for info in archive.infolist():
                    Path(archive.extract(info, task)).chmod((info.external_attr >> 16) & 0o777)
            sources_only[artefact.name] = without_bytecode(task)
        venv = work / "python"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # noqa: S603
        yield Tasks(shipped, sources_only, venv / "bin")


def without_bytecode(task: Path) -> Path:
    """A copy of `task` with no `__pycache__`: the artefact as the zips were before."""
    copy = task.with_name(f"{task.name}-sources-only")
    shutil.copytree(task, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@asynccontextmanager
async def started(task: Path, bare_python: Path, env: dict[str, str]) -> AsyncIterator[str]:
    port = _free_port()
    env = {**env, "PATH": f"{bare_python}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    env |= {"HOME": str(bare_python.parent), "AWS_LWA_PORT": str(port)}
    process = await asyncio.create_subprocess_exec(
        task / "handlers" / "run.sh",
        cwd=task,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await process.wait()


async def one_run(task: Path, bare_python: Path, env: dict[str, str], figures: Figures) -> None:
    user_id, chat_id = await create_user_with_chat(env["DATABASE_URL"])
    headers = {"authorization": f"Bearer {token_for(user_id)}"}
    body = {"chatId": str(chat_id), "content": "hello"}
    began = time.perf_counter()
    async with started(task, bare_python, env) as origin, client(origin) as http:
        await _until_ready(http)
        figures.ready.append(time.perf_counter() - began)
        first = await post_stream(http, "/api/chat/respond", body, headers)
        figures.cold.append(_first_token(first) - began)
        second = await post_stream(http, "/api/chat/respond", body, headers)
        figures.warm.append(_first_token(second) - second.sent)


async def measure(runs: int, tasks: Tasks) -> dict[str, Figures]:
    """Cold (with and without bytecode) and warm figures, interleaved run by run."""
    server = resolve_server_url()
    bare_python = tasks.bare_python
    async with migrated_template(server) as template, fresh_database(server, template) as url:
        env = {
            "DATABASE_URL": url,
            "SUPABASE_JWT_SECRET": JWT_SECRET,
            "INNGEST_EVENT_KEY": "unused",
            "INNGEST_SIGNING_KEY": "signkey-prod-" + "0" * 64,
            "SCRIPTED_TOKEN_DELAY_MS": "0",
        }
        sources = {
            "bytecode shipped in the zip": tasks.shipped["respond"],
            "no bytecode (the zip before)": tasks.sources_only["respond"],
        }
        figures = {name: Figures() for name in sources}
        for _ in range(runs):
            for name, root in sources.items():
                no_cache = {"PYTHONDONTWRITEBYTECODE": "1"}
                await one_run(root, bare_python, env | no_cache, figures[name])
    return figures


def render(figures: dict[str, Figures], runs: int) -> str:
    lines = [
        f"| respond artefact, run.sh (median of {runs}) | start to ready ms "
        "| start to first token ms | warm request to first token ms |",
        "|---|---:|---:|---:|",
    ]
    for name, f in figures.items():
        ready, cold, warm = (statistics.median(v) * 1000 for v in (f.ready, f.cold, f.warm))
        lines.append(f"| cold, {name} | {ready:,.0f} | {cold:,.0f} | {warm:,.1f} |")
    return "\n".join(lines)


def _first_token(stream: Stream) -> float:
    token = stream.first("token")
    if stream.status != 200 or token is None:
        raise RuntimeError(f"no token in the reply (status {stream.status})")
    return token.at


async def _until_ready(http: httpx.AsyncClient) -> None:
    while True:
        try:
            if (await http.get("/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(READINESS_POLL_S)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
