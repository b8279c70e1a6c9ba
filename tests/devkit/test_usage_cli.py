"""`handoff usage`: the operator's table of every user's usage by model, from DATABASE_URL."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import uuid
from pathlib import Path

from tests.support import create_user_with_chat, execute, fetch, running_stack, token_for

HANDOFF = str(Path(sys.executable).parent / "handoff")
PRICES = {"scripted": {"input": 1000.0, "output": 2000.0}}


async def handoff_usage(database_url: str, *args: str, prices: bool = True) -> str:
    """Run the CLI as an operator would; its standard output."""
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("MODEL_PRICES", None)
    if prices:
        env["MODEL_PRICES"] = json.dumps(PRICES)
    process = await asyncio.create_subprocess_exec(
        HANDOFF,
        "usage",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


def cells(line: str) -> list[str]:
    """A line's cells: the columns are two spaces apart at least (an empty cell is left out)."""
    return [cell.strip() for cell in re.split(r"\s{2,}", line.strip())]


async def test_the_operator_sees_every_users_usage_by_model(database_url: str) -> None:
    first_user, first_chat = await create_user_with_chat(database_url)
    second_user, second_chat = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        for user_id, chat_id, content in (
            (first_user, first_chat, "hello"),
            (first_user, first_chat, "/calc 1+1"),
            (second_user, second_chat, "hi"),
        ):
            await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": content})
        await stack.executor.wait_idle()
    used = {
        row["user_id"]: row
        for row in await fetch(
            database_url,
            "select user_id, count(*) as turns, sum(input_tokens) as input,"
            " sum(output_tokens) as output, sum(tool_calls) as tools"
            " from reply_usage group by user_id",
        )
    }

    # WHEN the operator asks for everyone's usage
    table = (await handoff_usage(database_url)).strip().splitlines()
    # THEN there is a line per user and model, with their figures and cost, then the total
    assert cells(table[0]) == [
        "user",
        "email",
        "model",
        "turns",
        "input tokens",
        "output tokens",
        "tool calls",
        "cost USD",
    ]
    lines = {cells(line)[0]: cells(line) for line in table[1:]}
    for user_id in (first_user, second_user):
        row = used[user_id]
        cost = (row["input"] * 1000 + row["output"] * 2000) / 1_000_000
        assert lines[str(user_id)] == [
            str(user_id),
            f"{user_id}@test",
            "scripted",
            f"{row['turns']:,}",
            f"{row['input']:,}",
            f"{row['output']:,}",
            f"{row['tools']:,}",
            f"{cost:.4f}",
        ]
    total = [sum(row[key] for row in used.values()) for key in ("input", "output", "tools")]
    total_cost = sum((row["input"] * 1000 + row["output"] * 2000) for row in used.values())
    assert lines["total (2 users)"] == [
        "total (2 users)",
        "3",
        *(f"{n:,}" for n in total),
        f"{total_cost / 1_000_000:.4f}",
    ]
    assert len(table) == 4

    # WHEN the operator asks for one user's, over the last day, and without prices
    one = await handoff_usage(database_url, "--user", str(second_user), "--days", "1", prices=False)
    [_, line, total_line] = one.strip().splitlines()
    assert cells(line)[:2] == [str(second_user), f"{second_user}@test"]
    assert cells(line)[-1] == f"{used[second_user]['tools']:,}"  # and no cost
    assert cells(total_line)[0] == "total (1 user)"

    # WHEN that user's usage is older than the window, or the user has none
    await execute(
        database_url, "update reply_usage set created_at = created_at - interval '2 days'"
    )
    assert (await handoff_usage(database_url, "--days", "2")).strip() == "no usage recorded"
    assert len((await handoff_usage(database_url, "--days", "3")).strip().splitlines()) == 4
    lonely = str(uuid.uuid4())
    assert (await handoff_usage(database_url, "--user", lonely)).strip() == "no usage recorded"
