"""Row changes as supabase-js receives them, checked against the subscriber's RLS.

Realtime sends a subscriber a change only when the subscriber's RLS lets them see the row, and
checks that by looking the row up by primary key; `visible_changes` does the same, in one
transaction as the user, for one batch of decoded changes.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, Literal, TypedDict
from uuid import UUID

from psycopg import sql

from devkit.pgoutput import RowChange, Toast, json_value
from infra.db import Pool
from infra.store.access import Claims, user_transaction
from infra.store.ids import ChatId

# The tables the chat page subscribes to, with their primary key (a uuid).
TABLE_KEYS = {("public", "message"): "id", ("public", "message_draft"): "message_id"}
# Under the subscriber's RLS: which of the batch's rows it may see (those still in its chat), and
# the text of the columns a change left out as unchanged TOAST values.
VISIBLE_ROWS_SQL = (
    "select {key} as key{columns} from {table} where {key} = any(%s) and chat_id = %s"
)


class PostgresChange(TypedDict):
    """supabase-js `RealtimePostgresChangesPayload` of an INSERT or UPDATE."""

    schema: str
    table: str
    commit_timestamp: str
    eventType: Literal["INSERT", "UPDATE"]  # the wire name
    new: dict[str, Any]
    old: dict[str, Any]
    errors: None


def commit_time(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def visible_rows_sql(table: tuple[str, str], key: str, toasted: list[str]) -> sql.Composed:
    columns = sql.SQL("").join(
        sql.SQL(", {}::text as {}").format(sql.Identifier(c), sql.Identifier(c)) for c in toasted
    )
    return sql.SQL(VISIBLE_ROWS_SQL).format(
        key=sql.Identifier(key), columns=columns, table=sql.Identifier(*table)
    )


def postgres_change(change: RowChange, reread: dict[str, Any]) -> PostgresChange:
    """The payload, unchanged TOAST columns filled in from the re-read row."""
    types = {c.name: c.type_oid for c in change.relation.columns}
    new = {
        name: json_value(types[name], reread[name]) if value is Toast.UNCHANGED else value
        for name, value in change.new.items()
    }
    return PostgresChange(
        schema=change.relation.namespace,
        table=change.relation.name,
        commit_timestamp=commit_time(change.commit_timestamp),
        eventType="INSERT" if change.kind == "INSERT" else "UPDATE",
        new=new,
        old={k: v for k, v in change.old.items() if v is not Toast.UNCHANGED},
        errors=None,
    )


async def visible_changes(
    pool: Pool, claims: Claims, chat_id: ChatId, changes: list[RowChange]
) -> list[PostgresChange]:
    """The changes whose row the user sees under RLS, in order; one transaction as the user."""
    groups: defaultdict[tuple[str, str], list[RowChange]] = defaultdict(list)
    for change in changes:
        groups[change.table].append(change)
    found: dict[tuple[tuple[str, str], str], dict[str, Any]] = {}
    async with user_transaction(pool, claims) as conn:
        for table, group in groups.items():
            key = TABLE_KEYS[table]
            toasted = sorted({n for c in group for n, v in c.new.items() if v is Toast.UNCHANGED})
            ids = list({UUID(c.new[key]) for c in group})
            cursor = await conn.execute(visible_rows_sql(table, key, toasted), (ids, chat_id))
            for row in await cursor.fetchall():
                found[table, str(row["key"])] = row
    return [
        postgres_change(c, reread)
        for c in changes
        if (reread := found.get((c.table, c.new[TABLE_KEYS[c.table]]))) is not None
    ]
