"""The LangGraph server (`langgraph dev`, in-memory runtime) serving the same graph and model.

It lives in its own virtual environment under `.bench/`, made on first use with uv, with the
project's langgraph and langchain-core versions pinned so both sides run the same graph code.
Analytics and tracing are off; nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.sse import Stream, post_stream
from tests.pg_servers import free_port

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"
VENV = BENCH_DIR / "langgraph-venv"
GRAPH_ID = "agent"
# Enough job slots that 20 concurrent clients never wait for a free one.
JOBS_PER_WORKER = 20
ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGGRAPH_NO_ANALYTICS": "1",
}


class LangGraphUnavailable(RuntimeError):
    """The LangGraph server could not be installed or started here."""


def _uv() -> list[str]:
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def ensure_venv() -> Path:
    """The `langgraph` program of the bench environment, installed on first use."""
    program = VENV / "bin" / "langgraph"
    if program.exists():
        return program
    pins = [
        f"{name}=={importlib.metadata.version(name)}" for name in ("langgraph", "langchain-core")
    ]
    try:
        subprocess.run([*_uv(), "venv", "-q", str(VENV)], check=True)  # noqa: S603
        subprocess.run(  # noqa: S603
            [
                *_uv(),
                "pip",
                "install",
                "-q",
                "-p",
                str(VENV / "bin" / "python"),
                "langgraph-cli[inmem]",
                *pins,
            ],
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise LangGraphUnavailable(f"could not install langgraph-cli[inmem]: {exc}") from exc
    return program


@asynccontextmanager
async def langgraph_server() -> AsyncIterator[str]:
    """`langgraph dev` on a free loopback port; yields its origin once it answers."""
    program = await asyncio.to_thread(ensure_venv)
    work = BENCH_DIR / "langgraph"
    work.mkdir(parents=True, exist_ok=True)
    config = work / "langgraph.json"
    graph = ROOT / "bench" / "langgraph_graph.py"
    config.write_text(
        json.dumps({"dependencies": [str(ROOT)], "graphs": {GRAPH_ID: f"{graph}:graph"}})
    )
    port = free_port()
    log = work / "server.log"
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            str(program), "dev", "--port", str(port), "--no-browser", "--no-reload",
            "--n-jobs-per-worker", str(JOBS_PER_WORKER), "--config", str(config),
            cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )  # fmt: skip
    origin = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(origin, proc, log)
        yield origin
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(15):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _wait_ready(origin: str, proc: asyncio.subprocess.Process, log: Path) -> None:
    deadline = time.monotonic() + 90
    async with httpx.AsyncClient(base_url=origin, timeout=2) as http:
        while True:
            if proc.returncode is not None:
                tail = (await asyncio.to_thread(log.read_text, errors="replace"))[-2000:]
                raise LangGraphUnavailable(f"langgraph dev exited with {proc.returncode}:\n{tail}")
            try:
                if (await http.get("/ok")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise LangGraphUnavailable("langgraph dev did not answer /ok within 90 s")
            await asyncio.sleep(0.2)


async def create_thread(http: httpx.AsyncClient) -> str:
    response = await http.post("/threads", json={})
    response.raise_for_status()
    return str(response.json()["thread_id"])


async def run_stream(http: httpx.AsyncClient, thread_id: str, content: str) -> Stream:
    """One run on a thread, as the quick path runs a turn: pause before tools, stream tokens."""
    body: dict[str, Any] = {
        "assistant_id": GRAPH_ID,
        "input": {"messages": [{"type": "human", "content": content}]},
        "stream_mode": ["messages-tuple"],
        "interrupt_before": ["tools"],
    }
    return await post_stream(http, f"/threads/{thread_id}/runs/stream", body)


def first_token_at(stream: Stream) -> float | None:
    """When the first message chunk with text arrived."""
    for arrival in stream.events:
        if arrival.event == "messages" and isinstance(arrival.data, list) and arrival.data:
            chunk = arrival.data[0]
            if isinstance(chunk, dict) and chunk.get("content"):
                return arrival.at
    return None
