"""Database faults: Postgres restarts under a running app, and PgBouncer in transaction mode."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from infra.db import create_pool
from tests.pg_servers import RestartablePostgres, StopMode, pgbouncer_binary, restartable_postgres
from tests.reliability.db_fault_scenarios import Observed, pgbouncer_run, postgres_restart_run
from tests.support import fetch

TOOL_TURN = [HumanMessage, AIMessage, ToolMessage, AIMessage]
TERMINATE_SQL = "select pg_terminate_backend(%s, 10000) as ok"


@pytest.fixture(scope="module")
async def restartable_server() -> AsyncIterator[RestartablePostgres]:
    """A Postgres of this module's own (not DATABASE_URL's, not the shared test server)."""
    async with restartable_postgres() as server:
        yield server


@pytest.fixture
def pgbouncer_installed() -> None:
    """Skip where PgBouncer is missing on a developer machine; in CI it must be installed."""
    if pgbouncer_binary() is not None:
        return
    reason = "pgbouncer is not installed (apt-get install pgbouncer)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI installs it in .ci/run")
    pytest.skip(reason)


@pytest.mark.parametrize("stop_mode", ["fast", "immediate"])
async def test_background_run_survives_a_postgres_restart(
    restartable_server: RestartablePostgres, stop_mode: StopMode
) -> None:
    # GIVEN an app whose pool holds idle connections, and a turn whose tool sleeps 1 s in the
    # background, WHEN Postgres restarts during that sleep (fast: clients are disconnected;
    # immediate: a crash and recovery)
    observed = Observed()
    figures = await postgres_restart_run(
        restartable_server, sleep_seconds=1.0, stop_mode=stop_mode, observed=observed
    )

    assert observed.restarted_during_tool_step, "the restart must land inside the tool step"
    # THEN the run completes once, and a second turn works through the same app (its pool
    # recovered without an app restart)
    assert figures == {
        "final_messages": 2,
        "duplicates": 0,
        "lost": 0,
        "seconds": figures["seconds"],
    }
    assert figures["seconds"] < 10
    first, second = observed.messages
    assert "slept 1s" in first["content"]
    assert "42" in second["content"]
    assert [job["status"] for job in observed.jobs] == ["completed", "completed"]
    assert [events[-1][0] for events in observed.turns] == ["handoff", "handoff"]
    assert [type(m) for m in observed.history] == TOOL_TURN + TOOL_TURN


async def test_pool_replaces_every_dead_idle_connection_at_once(
    restartable_server: RestartablePostgres,
) -> None:
    # GIVEN a pool with eight idle connections
    pool = create_pool(restartable_server.url(), max_size=10)
    await pool.open()
    try:
        taken = [await pool.getconn() for _ in range(8)]
        for conn in taken:
            await pool.putconn(conn)
        # WHEN Postgres restarts, so that every one of them is dead
        await restartable_server.restart("fast")
        # THEN the next checkout gets a live connection at once, rather than probing the dead
        # ones one by one with a doubling backoff (1 + 2 + 4 + ... s: past the 30 s timeout)
        started = time.monotonic()
        async with pool.connection() as conn:
            await conn.execute("select 1")
        assert time.monotonic() - started < 2
    finally:
        await pool.close()


async def test_a_connection_the_server_closed_right_after_its_return_is_not_handed_out(
    database_url: str,
) -> None:
    # GIVEN a pool of one connection, which came back just now, so recently that a checkout skips
    # the probe's round trip while the connection stays quiet
    pool = create_pool(database_url, max_size=1, recent_s=60)
    await pool.open()
    try:
        async with pool.connection() as conn:
            before = await (await conn.execute("select pg_backend_pid() as pid")).fetchone()
        assert before is not None
        # WHEN the server ends its backend (as a restart, a failover or a pooler's recycle does)
        # (and waits, up to 10 s, until it has gone)
        [ended] = await fetch(database_url, TERMINATE_SQL, before["pid"])
        assert ended["ok"]
        # THEN the next checkout gets a live connection, not the dead one
        async with pool.connection() as conn:
            after = await (await conn.execute("select pg_backend_pid() as pid")).fetchone()
        assert after is not None
        assert after["pid"] != before["pid"]
    finally:
        await pool.close()


@pytest.mark.usefixtures("pgbouncer_installed")
@pytest.mark.parametrize("pool_size", [1, 4])
async def test_turns_work_through_pgbouncer_in_transaction_mode(
    server_url: str, template_name: str, pool_size: int
) -> None:
    # GIVEN the app's DATABASE_URL pointing at PgBouncer in transaction mode with `pool_size`
    # server connections for all of the app's connections (migrations ran directly),
    # WHEN a tool turn hands off and a plain turn follows in the same chat
    observed = Observed()
    figures = await pgbouncer_run(server_url, template_name, pool_size=pool_size, observed=observed)

    # THEN both complete once, through the pooler
    assert figures == {
        "final_messages": 2,
        "duplicates": 0,
        "lost": 0,
        "seconds": figures["seconds"],
    }
    assert figures["seconds"] < 10
    assert observed.pooler_logins
    assert [events[-1][0] for events in observed.turns] == ["handoff", "done"]
    first, second = observed.messages
    assert "42" in first["content"]
    assert second["content"] == 'You said: "thanks!"'
    [job] = observed.jobs
    assert job["status"] == "completed"
    # AND the second turn saw the first: one durable thread holds both
    assert [type(m) for m in observed.history] == [*TOOL_TURN, HumanMessage, AIMessage]
    assert observed.history[0].content == "/calc 2*21"
    assert observed.history[2].content == "42"
