"""The JavaScript client (clients/js/) against a real `handoff dev`: this test starts the command
as a person does and runs the package's own tests (`node --test`, on its built `dist/`) with the
server's URL, the banner's token and the secret its tokens are signed with (to make ones that
expire mid-reply). One server per draft transport, since a frontend must follow either; a last
run stops the server under a followed reply, which must end with a typed error.

`.ci/run` installs the package's locked dependencies and builds it; elsewhere the test builds it
when its dependencies are installed, and is skipped, with the reason, without node.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.dev_server import DevServer, dev_servers, start_handoff_dev

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "js"
NODE_TIMEOUT_S = 90
# Slow enough that a reply's quick path spans several draft writes (one per 250 ms at most),
# so a page opened while it streams finds it half-written.
TOKEN_DELAY_MS = "60"
# Each Node test makes its own chats and turns, more in a minute than one person's limits allow.
ROOMY_LIMITS = {
    "MAX_CHATS_PER_MINUTE": "200",
    "MAX_TURNS_PER_MINUTE": "200",
    "MAX_ACTIVE_TURNS_PER_USER": "20",
}


def node_and_package() -> str:
    """node, with the package's dependencies installed and built; skipped without node or its
    dependencies, except under CI, where .ci/run installs both."""
    node = shutil.which("node")
    missing = []
    if node is None:
        missing.append("node (Node.js 20+)")
    if not (PACKAGE / "node_modules" / "typescript").is_dir():
        missing.append("the package's dependencies (npm ci --prefix clients/js)")
    if missing:
        reason = "the JavaScript client's tests need " + ", ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; .ci/run installs them")
        pytest.skip(reason)
    assert node is not None
    return node


async def build(node: str) -> None:
    """tsc, as `npm run build` runs it: the tests import what the package ships."""
    tsc = PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"
    child = await asyncio.create_subprocess_exec(
        node, str(tsc), "-p", str(PACKAGE / "tsconfig.json"), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    assert child.returncode == 0, out.decode()


async def run_node_tests(node: str, server: DevServer, data_dir: Path, *files: str) -> str:
    """`node --test` on `files` (under clients/js/test/) against `server`; its output."""
    env = {
        **os.environ,
        "HANDOFF_URL": server.origin,
        "HANDOFF_TOKEN": server.token,
        "HANDOFF_JWT_SECRET": (data_dir / "jwt-secret").read_text().strip(),
        "HANDOFF_DEV_PID": str(server.child.pid),
    }
    child = await asyncio.create_subprocess_exec(
        node,
        "--test",
        "--test-concurrency=1",
        # supabase-js keeps a 10 s timer after a socket closes: the files end with their tests.
        "--test-force-exit",
        "--test-reporter=spec",
        *(f"test/{name}" for name in files),
        cwd=PACKAGE,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(NODE_TIMEOUT_S):
            out, _ = await child.communicate()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    report = out.decode()
    print(report)
    assert child.returncode == 0, report + "\n--- handoff dev ---\n" + server.output[-4000:]
    return report


SUITE = (
    "routes.test.mjs",
    "reply.test.mjs",
    "reload.test.mjs",
    "token.test.mjs",
    "ai-sdk.test.mjs",
)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", ["table", "broadcast"])
async def test_the_package_follows_replies_against_handoff_dev(
    logical_database_url: str, tmp_path: Path, transport: str
) -> None:
    node = node_and_package()
    await build(node)
    data_dir = tmp_path / "dev"
    async with dev_servers() as started:
        server = await start_handoff_dev(
            logical_database_url,
            data_dir,
            SCRIPTED_TOKEN_DELAY_MS=TOKEN_DELAY_MS,
            DRAFT_TRANSPORT=transport,
            **ROOMY_LIMITS,
        )
        started.append(server)
        report = await run_node_tests(node, server, data_dir, *SUITE)
        assert await server.stop() == 0
    assert re.search(r"^\S+ fail 0$", report, re.MULTILINE), report


@pytest.mark.timeout(120)
async def test_a_followed_reply_ends_with_a_typed_error_when_the_server_goes_away(
    logical_database_url: str, tmp_path: Path
) -> None:
    node = node_and_package()
    await build(node)
    data_dir = tmp_path / "dev"
    async with dev_servers() as started:
        server = await start_handoff_dev(
            logical_database_url, data_dir, SCRIPTED_TOKEN_DELAY_MS=TOKEN_DELAY_MS
        )
        started.append(server)
        # The test stops the server itself (SIGTERM to HANDOFF_DEV_PID) while it follows.
        await run_node_tests(node, server, data_dir, "gone.test.mjs")
        assert server.child.returncode is not None or await server.stop() == 0
