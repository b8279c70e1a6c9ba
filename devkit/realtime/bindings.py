"""A channel's Postgres Changes bindings, parsed as Realtime parses them; no I/O.

A binding is what supabase-js and supabase-py send in `config.postgres_changes`: `{event,
schema, table, filter?, select?}`. Realtime answers the join with the bindings and an id for
each, and every change carries the ids of the bindings it matched. A binding's filters are
checked against its table (devkit/realtime/postgres_changes.py) before it matches changes.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from devkit.pgoutput import Relation, RowChange, Toast

Event = Literal["*", "INSERT", "UPDATE", "DELETE"]
# Realtime's filter operators; this server evaluates the first three.
SUPPORTED_OPERATORS = ("eq", "neq", "in")
REALTIME_OPERATORS = (
    *SUPPORTED_OPERATORS,
    "lt", "lte", "gt", "gte", "like", "ilike", "is", "match", "imatch", "isdistinct",
)  # fmt: skip


class BindingError(ValueError):
    """Realtime's words for a binding it cannot subscribe: sent as a `system` error."""


@dataclass(frozen=True)
class Filter:
    column: str
    operator: str
    text: str  # as the client wrote it (`in`: the values between the parentheses)
    negate: bool
    # The values a row's column is compared with, as the decoded row holds them (set once the
    # binding is checked against the table).
    values: tuple[Any, ...] = ()

    def accepts(self, value: Any) -> bool:
        if value is Toast.UNCHANGED:
            return False
        found = value in self.values
        matched = not found if self.operator == "neq" else found
        return matched != self.negate


@dataclass
class Binding:
    params: dict[str, Any]  # as sent: echoed in the join's reply, with its id
    id: int
    event: Event
    schema: str
    table: str
    filters: list[Filter] = field(default_factory=list)
    select: list[str] | None = None

    @property
    def reply(self) -> dict[str, Any]:
        return {**self.params, "id": self.id}

    def describe(self) -> str:
        filters = [[f.column, f.operator, f.text, f.negate] for f in self.filters]
        return (
            f"[event: {self.event}, schema: {self.schema}, table: {self.table},"
            f" filters: {json.dumps(filters)}, select: {json.dumps(self.select)}]"
        )

    def covers(self, relation: Relation) -> bool:
        return self.schema in ("*", relation.namespace) and self.table in ("*", relation.name)

    def matches(self, change: RowChange) -> bool:
        """Realtime's filters on the WAL's values. Deletes are not delivered (see the package)."""
        if change.kind == "DELETE" or self.event not in ("*", change.kind):
            return False
        if not self.covers(change.relation):
            return False
        return all(f.accepts(change.new.get(f.column, Toast.UNCHANGED)) for f in self.filters)


def binding_id(params: dict[str, Any]) -> int:
    """A stable id for the binding's parameters (Realtime: :erlang.phash2 of them)."""
    return zlib.crc32(json.dumps(params, sort_keys=True).encode()) & 0x7FFFFFF


def parse_binding(params: Any) -> Binding:
    """The binding, as Realtime's Subscriptions.parse_subscription_params reads it."""
    if not isinstance(params, dict):
        raise BindingError(
            "No subscription params provided. Please provide at least a `schema` or `table` to"
            f" subscribe to: {json.dumps(params)}"
        )
    event = str(params.get("event", "*")).upper()
    action: Event = event if event in ("INSERT", "UPDATE", "DELETE") else "*"  # type: ignore[assignment]
    schema, table, filter_text = params.get("schema"), params.get("table"), params.get("filter")
    if isinstance(schema, str) and isinstance(table, str) and isinstance(filter_text, str):
        filters = parse_filters(filter_text)
    elif isinstance(schema, str) and isinstance(table, str) and "filter" not in params:
        filters = []
    elif isinstance(schema, str) and "table" not in params and "filter" not in params:
        table, filters = "*", []
    elif isinstance(table, str) and "schema" not in params and "filter" not in params:
        schema, filters = "public", []
    else:
        shown = {k: v for k, v in params.items() if k not in ("user_token", "auth_token")}
        raise BindingError(
            "No subscription params provided. Please provide at least a `schema` or `table` to"
            f" subscribe to: {json.dumps(shown)}"
        )
    select = params.get("select")
    if isinstance(select, str):
        raise BindingError(
            "Error parsing `select` params: expected a list of column name strings,"
            ' e.g. select: ["col1", "col2"]'
        )
    columns = [c for c in select if isinstance(c, str)] if isinstance(select, list) else []
    if columns and "*" in (schema, table):
        raise BindingError(
            "Column selection is not supported for wildcard subscriptions. Provide an explicit"
            " schema and table name."
        )
    assert isinstance(schema, str)
    assert isinstance(table, str)
    return Binding(params, binding_id(params), action, schema, table, filters, columns or None)


def parse_filters(text: str) -> list[Filter]:
    if not text.strip():
        return []
    filters = []
    for segment in _split_top_level(text.strip()):
        segment = segment.strip()
        if not segment:
            raise BindingError(
                "Error parsing `filter` params: filter must not contain empty segments"
                " (check for extra commas)"
            )
        column, equals, rest = segment.partition("=")
        negate = rest.startswith("not.")
        operator, dot, value = rest.removeprefix("not.").partition(".")
        if not equals or not dot:
            raise BindingError(f"Error parsing `filter` params: {json.dumps([segment])}")
        if operator not in REALTIME_OPERATORS:
            raise BindingError(f"Error parsing `filter` params: {json.dumps([operator, value])}")
        if operator not in SUPPORTED_OPERATORS:
            raise BindingError(
                f"Error parsing `filter` params: the development server evaluates"
                f" {', '.join(SUPPORTED_OPERATORS)} only, not {operator}"
            )
        if operator == "in":
            if not (value.startswith("(") and value.endswith(")")):
                raise BindingError(
                    "Error parsing `filter` params: `in` filter value must be wrapped by"
                    " parentheses"
                )
            value = value[1:-1]
        elif value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1].replace('\\"', '"')
        filters.append(Filter(column, operator, value, negate))
    return filters


def _split_top_level(text: str) -> list[str]:
    parts, current, depth, quoted = [], "", 0, False
    for char in text:
        if char == '"':
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth = max(0, depth - 1)
        elif not quoted and depth == 0 and char == ",":
            parts.append(current)
            current = ""
            continue
        current += char
    return [*parts, current]


def in_values(text: str) -> list[str]:
    return [v.strip().strip('"') for v in _split_top_level(text)] if text.strip() else []
