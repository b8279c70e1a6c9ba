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
# Only while the job exists: one deleted with its chat or reply (migration 0019) keeps nothing,
# and the object its large output went to waits in the erasure queue (infra/store/erasures.py).
STORE_SQL = """
with job as (
  select 1 from public.job_runs where idempotency_key = %(job_key)s
), stored as (
  insert into handoff.tool_results
    (thread_id, tool_call_id, name, content, artifact, status, note)
  select %(thread_id)s, %(id)s, %(name)s, %(content)s, %(artifact)s, %(status)s, %(note)s
  where exists (select 1 from job)
  on conflict (thread_id, tool_call_id) do nothing
)
insert into handoff.erased_object (uri)
select %(artifact)s::jsonb ->> 'uri'
where not exists (select 1 from job) and %(artifact)s::jsonb ->> 'uri' is not null
on conflict do nothing
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


async def store_result(pool: Pool, job_key: str, thread_id: str, result: ToolResult) -> ToolResult:
    """Store `result` of the job's call unless a concurrent attempt stored one first; returns
    the stored one (or `result`, unstored, once the job was deleted with its chat or reply)."""
    artifact = result.get("artifact")
    params = {
        "job_key": job_key,
        "thread_id": thread_id,
        "id": result["id"],
        "name": result["name"],
        "content": result["content"],
        "artifact": None if artifact is None else Jsonb(artifact),
        "status": result.get("status", "success"),
        "note": result.get("note"),
    }
    async with pool.connection() as conn:
        await conn.execute(STORE_SQL, params)
    return await fetch_result(pool, thread_id, result["id"]) or result
