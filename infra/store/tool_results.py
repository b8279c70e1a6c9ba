"""The first result of each tool call, stored durably so no run executes a call twice.

Inngest memoizes a step's output per run only: a dashboard replay starts a new run with no
memo, and a step whose output was lost (crash, timeout) runs again. Keyed by thread and tool call
id, the first stored result wins and every later attempt reuses it.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from psycopg.types.json import Jsonb

from infra.db import Pool
from infra.large_outputs import OutputRef

FETCH_SQL = """
select tool_call_id as id, name, content, artifact, status, note from handoff.tool_results
where thread_id = %s and tool_call_id = %s
"""
STORE_SQL = """
insert into handoff.tool_results (thread_id, tool_call_id, name, content, artifact, status, note)
values (%s, %s, %s, %s, %s, %s, %s)
on conflict (thread_id, tool_call_id) do nothing
"""


class ToolResult(TypedDict):
    id: str
    name: str
    content: str
    artifact: NotRequired[OutputRef | None]  # where a large output is (content is its preview)
    # `error`: the tool could not answer; `content` tells the model why, in a line.
    status: NotRequired[Literal["success", "error"]]
    # What the user is told when `content` is not the tool's whole output (cut short, a
    # preview, stopped after its time budget).
    note: NotRequired[str | None]


async def fetch_result(pool: Pool, thread_id: str, tool_call_id: str) -> ToolResult | None:
    async with pool.connection() as conn:
        row = await (await conn.execute(FETCH_SQL, (thread_id, tool_call_id))).fetchone()
    if row is None:
        return None
    return ToolResult(
        id=row["id"],
        name=row["name"],
        content=row["content"],
        artifact=row["artifact"],
        status=row["status"],
        note=row["note"],
    )


async def store_result(pool: Pool, thread_id: str, result: ToolResult) -> ToolResult:
    """Store `result` unless a concurrent attempt stored one first; returns the stored one (or
    `result`, unstored, once its chat is deleted)."""
    async with pool.connection() as conn:
        artifact = result.get("artifact")
        await conn.execute(
            STORE_SQL,
            (
                thread_id,
                result["id"],
                result["name"],
                result["content"],
                None if artifact is None else Jsonb(artifact),
                result.get("status", "success"),
                result.get("note"),
            ),
        )
    # Nothing is stored for a chat deleted meanwhile (migration 0019): its job stops next.
    return await fetch_result(pool, thread_id, result["id"]) or result
