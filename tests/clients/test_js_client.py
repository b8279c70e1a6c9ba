"""The JavaScript client (clients/js/) against a real `handoff dev`: this test starts the command
as a person does and runs the package's own tests (`node --test`, on its built `dist/`) with the
server's URL, the banner's token and the secret its tokens are signed with (to make ones that
expire mid-reply). One server per draft transport, since a frontend must follow either; one
for shared chats (two more users, made here as Supabase Auth would have them), an edit's
cascade (CASCADE_LIMIT 1, so that its card waits) and the React hook rendered in a DOM; a last
run stops the server under a followed reply, which must end with a typed error.

`.ci/run` installs the package's locked dependencies and builds it; elsewhere the test builds it
when its dependencies are installed, and is skipped, with the reason, without node.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.dev_server import STOP_WITHIN_S, DevServer, dev_servers, start_handoff_dev
from tests.support import execute

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


ADD_USER_SQL = "insert into auth.users (id, email) values (%s, %s)"


async def new_users(database_url: str, count: int) -> dict[str, str]:
    """`count` users besides the demo user, as Supabase Auth would have made them: their ids
    and e-mails for the Node tests (HANDOFF_USER_<n>_ID, HANDOFF_USER_<n>_EMAIL)."""
    env = {}
    for n in range(1, count + 1):
        user_id = uuid.uuid4()
        email = f"Member-{user_id}@Test.example"
        await execute(database_url, ADD_USER_SQL, user_id, email)
        env[f"HANDOFF_USER_{n}_ID"] = str(user_id)
        env[f"HANDOFF_USER_{n}_EMAIL"] = email
    return env


async def run_node_tests(
    node: str, server: DevServer, data_dir: Path, *files: str, **extra_env: str
) -> str:
    """`node --test` on `files` (under clients/js/test/) against `server`; its output."""
    env = {
        **os.environ,
        **extra_env,
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


@dataclass(frozen=True)
class Served:
    node: str
    server: DevServer
    data_dir: Path

    async def run(self, *files: str, **env: str) -> str:
        return await run_node_tests(self.node, self.server, self.data_dir, *files, **env)


@asynccontextmanager
async def served(database_url: str, tmp_path: Path, **env: str) -> AsyncIterator[Served]:
    """The built package and a real `handoff dev` on `database_url`, with `env` besides the
    token delay, stopped at the end however the test went."""
    node = node_and_package()
    await build(node)
    data_dir = tmp_path / "dev"
    async with dev_servers() as started:
        server = await start_handoff_dev(
            database_url, data_dir, SCRIPTED_TOKEN_DELAY_MS=TOKEN_DELAY_MS, **env
        )
        started.append(server)
        yield Served(node, server, data_dir)


SUITE = (
    "routes.test.mjs",
    "reply.test.mjs",
    "reload.test.mjs",
    "token.test.mjs",
    "ai-sdk.test.mjs",
    "branches.test.mjs",
)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", ["table", "broadcast"])
async def test_the_package_follows_replies_against_handoff_dev(
    logical_database_url: str, tmp_path: Path, transport: str
) -> None:
    env = {"DRAFT_TRANSPORT": transport, **ROOMY_LIMITS}
    async with served(logical_database_url, tmp_path, **env) as dev:
        report = await dev.run(*SUITE)
        assert await dev.server.stop() == 0
    assert re.search(r"^\S+ fail 0$", report, re.MULTILINE), report


SHARED_SUITE = ("shared.test.mjs", "cascade.test.mjs", "react.test.mjs")


@pytest.mark.timeout(150)
async def test_the_package_follows_shared_chats_cascades_and_the_react_hook(
    logical_database_url: str, tmp_path: Path
) -> None:
    env = {"CASCADE_LIMIT": "1", "MAX_MEMBERS_PER_CHAT": "1", **ROOMY_LIMITS}
    async with served(logical_database_url, tmp_path, **env) as dev:
        users = await new_users(logical_database_url, 2)
        report = await dev.run(*SHARED_SUITE, **users)
        assert await dev.server.stop() == 0
    assert re.search(r"^\S+ fail 0$", report, re.MULTILINE), report
    assert re.search(r"^\S+ pass [1-9]", report, re.MULTILINE), report


@pytest.mark.timeout(120)
async def test_a_followed_reply_ends_with_a_typed_error_when_the_server_goes_away(
    logical_database_url: str, tmp_path: Path
) -> None:
    async with served(logical_database_url, tmp_path) as dev:
        # The test stops the server itself (SIGTERM to HANDOFF_DEV_PID) while it follows.
        await dev.run("gone.test.mjs")
        # On its way down already: waited for, not signalled twice (a second SIGTERM during
        # the shutdown ends it by the signal's default action).
        async with asyncio.timeout(STOP_WITHIN_S):
            await dev.server.child.wait()
        assert await dev.server.stop() == 0


@pytest.mark.timeout(120)
async def test_the_package_polls_a_database_realtime_cannot_follow(
    replica_database_url: str, tmp_path: Path
) -> None:
    """wal_level=replica: the feed says `unavailable`, with the server's words, and polls."""
    async with served(replica_database_url, tmp_path) as dev:
        report = await dev.run("unavailable.test.mjs")
        assert await dev.server.stop() == 0
    assert re.search(r"^\S+ pass 1$", report, re.MULTILINE), report
