"""`handoff prune`: counts with --dry-run and deletes nothing, then deletes what the dry run
counted, and says so in one line; without a number of days it asks for one."""

from __future__ import annotations

import os
import re
import subprocess
import uuid

from agent.threads import thread_key
from infra.db import Pool
from infra.store.ids import ChatId
from tests.dev_server import HANDOFF
from tests.infra.test_retention import AGE_SQL, chain
from tests.support import create_user_with_chat, execute, fetch

COUNT_SQL = "select count(*) as n from langgraph.checkpoints where thread_id = %s"
LINE = re.compile(
    r"^(would delete|deleted) (\d+) checkpoint\(s\), \d+ blob\(s\), \d+ pending write\(s\),"
    r" \d+ tool result\(s\)$"
)


def handoff_prune(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("RETENTION_DAYS", None)
    return subprocess.run(  # noqa: S603 - the project's own command
        [HANDOFF, "prune", *args], env=env, capture_output=True, text=True, timeout=120
    )


async def test_a_dry_run_counts_what_a_prune_then_deletes(pool: Pool, database_url: str) -> None:
    # GIVEN a thread of six checkpoints, all but its newest 40 days old
    _, chat_id = await create_user_with_chat(database_url)
    thread = thread_key(ChatId(chat_id), f"a{uuid.uuid4().hex[:8]}")
    ids = await chain(pool, thread, 6)
    await execute(database_url, AGE_SQL, thread, [ids[-1]])
    [before] = await fetch(database_url, COUNT_SQL, thread)

    # WHEN an operator asks what a 30-day prune would delete
    dry = handoff_prune(database_url, "--days", "30", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    would = LINE.match(dry.stdout.strip())
    assert would is not None, dry.stdout
    # THEN it says how many, and deletes nothing
    assert would.group(1) == "would delete"
    assert int(would.group(2)) > 0
    assert await fetch(database_url, COUNT_SQL, thread) == [before]

    # WHEN they prune, THEN exactly that many go
    done = handoff_prune(database_url, "--days", "30")
    assert done.returncode == 0, done.stderr
    deleted = LINE.match(done.stdout.strip())
    assert deleted is not None, done.stdout
    assert deleted.groups() == ("deleted", would.group(2))
    [after] = await fetch(database_url, COUNT_SQL, thread)
    assert after["n"] == before["n"] - int(would.group(2))


def test_without_days_it_asks_for_them(database_url: str) -> None:
    done = handoff_prune(database_url)
    assert done.returncode == 2
    assert "RETENTION_DAYS is not set: pass --days N" in done.stderr
