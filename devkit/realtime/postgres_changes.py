"""Postgres Changes as Realtime serves them: a channel's bindings (parsed in bindings.py) checked
against their tables when it joins, matched changes checked against the subscriber's RLS and sent
in Realtime's payload.

The payload (`data`) is what `realtime.apply_rls` builds: `{schema, table, commit_timestamp,
type, columns, record, old_record (updates), errors}`, values as `to_jsonb` renders them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql

from devkit.pgoutput import BOOL_OID, Relation, RowChange, Toast, json_value
from devkit.realtime.bindings import Binding, BindingError, Filter, in_values
from infra.db import Conn

TIMESTAMPTZ_OID, TIMESTAMP_OID = 1184, 1114
_OFFSET = re.compile(r"([+-]\d\d)(?::?(\d\d))?(?::?(\d\d))?$")

PUBLISHED_SQL = """
select schemaname, tablename, format('%%I.%%I', schemaname, tablename)::regclass::oid as oid
from pg_publication_tables where pubname = %s
"""
COLUMNS_SQL = """
select a.attname as name, t.typname as type, a.atttypid::int as type_oid,
  format_type(a.atttypid, a.atttypmod) as sql_type,
  has_column_privilege(%(role)s, a.attrelid, a.attnum, 'SELECT') as selectable
from pg_attribute a join pg_type t on t.oid = a.atttypid
where a.attrelid = %(oid)s and a.attnum > 0 and not a.attisdropped
order by a.attnum
"""
# The subscriber's role and claims for its RLS check, as apply_rls sets them. (Realtime also sets
# request.jwt.claim.sub; not here: on a pooled connection the setting outlives the transaction as
# '', which the migrations' auth.uid() would read as no user.)
AS_SUBSCRIBER_SQL = """
select set_config('role', %(role)s, true), set_config('request.jwt.claims', %(claims)s, true)
"""


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # pg_type.typname, as Realtime names it in `columns`
    type_oid: int
    sql_type: str
    selectable: bool


async def check_bindings(conn: Conn, role: str, bindings: Sequence[Binding]) -> None:
    """Realtime's checks when it records the subscriptions: the table is in the publication,
    filtered and selected columns exist and the role may read them, filter values cast to the
    column's type. Sets each filter's values; BindingError with Realtime's words otherwise."""
    published = await (await conn.execute(PUBLISHED_SQL, ("supabase_realtime",))).fetchall()
    for binding in bindings:
        tables = [
            row
            for row in published
            if binding.schema in ("*", row["schemaname"])
            and binding.table in ("*", row["tablename"])
        ]
        if not tables:
            raise BindingError(
                "Unable to subscribe to changes with given parameters. Please check Realtime is"
                f" enabled for the given connect parameters: {binding.describe()}"
            )
        if not binding.filters and binding.select is None:
            continue
        [table] = tables  # a filter or a select names one table (wildcards were refused)
        try:
            columns = await table_columns(conn, table["oid"], role)
            await _check_columns(conn, binding, columns)
        except (BindingError, psycopg.Error) as error:
            raise BindingError(
                "Unable to subscribe to changes with given parameters. An exception happened so"
                f" please check your connect parameters: {binding.describe()}."
                f" Exception: {_message(error)}"
            ) from error


def _message(error: Exception) -> str:
    if isinstance(error, psycopg.Error) and error.diag.message_primary:
        return error.diag.message_primary
    return str(error)


async def _check_columns(conn: Conn, binding: Binding, columns: list[Column]) -> None:
    by_name = {c.name: c for c in columns if c.selectable}
    checked = []
    for f in binding.filters:
        column = by_name.get(f.column)
        if column is None:
            raise BindingError(f"invalid column for filter {f.column}")
        texts = in_values(f.text) if f.operator == "in" else [f.text]
        if len(texts) > 100:
            raise BindingError("too many values for `in` filter. Maximum 100")
        values = [await _typed(conn, column, text) for text in texts]
        checked.append(Filter(f.column, f.operator, f.text, f.negate, tuple(values)))
    for name in binding.select or []:
        if name not in by_name:
            raise BindingError(f"invalid column for select {name}")
    binding.filters = checked


async def _typed(conn: Conn, column: Column, text: str) -> Any:
    """`text` cast to the column's type, as the decoded row would hold that value."""
    query = sql.SQL("select (%s::{})::text as v").format(sql.SQL(column.sql_type))
    async with conn.transaction():  # a savepoint: a failed cast leaves the caller's transaction
        row = await (await conn.execute(query, (text,))).fetchone()
    assert row is not None
    output = row["v"]
    if column.type_oid == BOOL_OID:  # boolean's cast to text spells it out; its output is t/f
        output = {"true": "t", "false": "f"}.get(output, output)
    return json_value(column.type_oid, output)


async def table_columns(conn: Conn, oid: int, role: str) -> list[Column]:
    rows = await (await conn.execute(COLUMNS_SQL, {"oid": oid, "role": role})).fetchall()
    return [Column(**row) for row in rows]


def realtime_value(type_oid: int, value: Any) -> Any:
    """A decoded value as `to_jsonb` renders it: timestamps in ISO 8601 with a `T`."""
    if not isinstance(value, str) or type_oid not in (TIMESTAMPTZ_OID, TIMESTAMP_OID):
        return value
    text = value.replace(" ", "T", 1)
    if type_oid == TIMESTAMPTZ_OID and (offset := _OFFSET.search(text)) is not None:
        hours, minutes, seconds = offset.groups()
        rendered = f"{hours}:{minutes or '00'}" + (f":{seconds}" if seconds else "")
        text = text[: offset.start()] + rendered
    return text


def commit_timestamp(at: datetime) -> str:
    """Realtime's: UTC, milliseconds."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def change_data(change: RowChange, columns: list[Column], select: list[str] | None) -> str:
    """The `data` of a change's postgres_changes message, as JSON, for a subscriber whose role
    reads `columns` (and who asked for `select`, if anything)."""
    keys = {c.name for c in change.relation.columns if c.part_of_key}
    wanted = None if select is None else set(select) | keys
    shown = [c for c in columns if c.selectable and (wanted is None or c.name in wanted)]
    types = {c.name: c.type_oid for c in shown}
    # An unchanged value stored out of line (TOAST) is not in the WAL: Realtime leaves it out.
    record = {
        name: realtime_value(types[name], value)
        for name, value in change.new.items()
        if name in types and value is not Toast.UNCHANGED
    }
    data: dict[str, Any] = {
        "schema": change.relation.namespace,
        "table": change.relation.name,
        "commit_timestamp": commit_timestamp(change.commit_timestamp),
        "type": change.kind,
        "columns": [{"name": c.name, "type": c.type} for c in shown],
        "record": record,
    }
    if change.kind == "UPDATE":
        # The old tuple when the WAL has one, else the replica identity's columns of the new
        # (wal2json's `identity`).
        old = change.old or {k: v for k, v in change.new.items() if k in keys}
        data["old_record"] = {
            name: realtime_value(types[name], value)
            for name, value in old.items()
            if name in types and value is not Toast.UNCHANGED
        }
    data["errors"] = None
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


async def as_subscriber(conn: Conn, claims: dict[str, Any]) -> None:
    """For the rest of the transaction, RLS sees the subscriber's role and claims."""
    params = {"role": str(claims.get("role", "")), "claims": json.dumps(claims)}
    await conn.execute(AS_SUBSCRIBER_SQL, params)


async def visible_changes(
    conn: Conn,
    claims: dict[str, Any],
    changes: Sequence[RowChange],
    key_types: dict[Relation, list[str]],
) -> list[bool]:
    """Which of `changes` the subscriber's RLS lets them see: each row looked up by its key (of
    the SQL types `key_types` gives) as the subscriber, as Realtime's prepared statement does;
    one transaction on `conn` for the batch."""
    groups: defaultdict[Relation, list[int]] = defaultdict(list)
    for n, change in enumerate(changes):
        groups[change.relation].append(n)
    seen = [False] * len(changes)
    async with conn.transaction():
        await as_subscriber(conn, claims)
        for relation, indexes in groups.items():
            keys = [c.name for c in relation.columns if c.part_of_key]
            if not keys:
                continue
            rows = [tuple(_key_text(changes[n].new.get(k)) for k in keys) for n in indexes]
            found = await _existing(conn, relation, keys, key_types[relation], rows)
            for n, key in zip(indexes, rows, strict=True):
                seen[n] = key in found
    return seen


def _key_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


async def _existing(
    conn: Conn, relation: Relation, keys: list[str], types: list[str], rows: list[tuple[Any, ...]]
) -> set[tuple[Any, ...]]:
    table = sql.Identifier(relation.namespace, relation.name)
    columns = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(k)) for k in keys)
    if len(keys) == 1:
        where = sql.SQL("{} = any(%s::{}[])").format(sql.Identifier(keys[0]), sql.SQL(types[0]))
        params: list[Any] = [[r[0] for r in rows]]
    else:
        one = sql.SQL(" and ").join(
            sql.SQL("{} = %s::{}").format(sql.Identifier(k), sql.SQL(t))
            for k, t in zip(keys, types, strict=True)
        )
        where = sql.SQL(" or ").join(sql.SQL("({})").format(one) for _ in rows)
        params = [v for r in rows for v in r]
    query = sql.SQL("select {} from {} where {}").format(columns, table, where)
    found = await (await conn.execute(query, params)).fetchall()
    return {tuple(row.values()) for row in found}
