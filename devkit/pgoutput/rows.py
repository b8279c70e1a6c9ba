"""Row changes from a stream of pgoutput messages; no I/O.

`Decoder` follows a slot's messages (the relations announced so far, the open transaction) and
turns row messages into `RowChange`s whose values are JSON values converted from the text format
the way Supabase Realtime converts them.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from devkit.pgoutput.messages import (
    Begin,
    Commit,
    Insert,
    Message,
    OldTuple,
    PgoutputError,
    RawValue,
    Relation,
    Skipped,
    Toast,
    Truncate,
    Update,
    parse_message,
)

logger = logging.getLogger(__name__)

BOOL_OID = 16
INTEGER_OIDS = frozenset({20, 21, 23})  # int8, int2, int4
FLOAT_OIDS = frozenset({700, 701})  # float4, float8
NUMERIC_OID = 1700
JSON_OIDS = frozenset({114, 3802})  # json, jsonb


def json_value(type_oid: int, text: str | None) -> Any:
    """A column's text as Realtime sends it: booleans, integers, floats, numerics and JSON
    typed; everything else (timestamps, uuids, arrays...) the Postgres text."""
    if text is None:
        return None
    if type_oid == BOOL_OID:
        return text == "t"
    if type_oid in INTEGER_OIDS:
        return int(text)
    if type_oid in FLOAT_OIDS or type_oid == NUMERIC_OID:
        return _number(text)
    if type_oid in JSON_OIDS:
        return json.loads(text)
    return text


def _number(text: str) -> int | float | str:
    if text.lstrip("-").isdigit():
        return int(text)
    value = float(text)
    # JSON has no NaN or infinities: those stay the text Postgres sent.
    return value if math.isfinite(value) else text


# A row as JSON values by column name; Toast.UNCHANGED where the value was not sent.
Row = dict[str, Any]


@dataclass(frozen=True)
class RowChange:
    """A row inserted, updated or deleted by a committed transaction."""

    kind: Literal["INSERT", "UPDATE", "DELETE"]
    relation: Relation
    commit_timestamp: datetime
    new: Row  # empty for a delete
    old: Row  # the old tuple's columns when one was sent, else empty

    @property
    def table(self) -> tuple[str, str]:
        return self.relation.namespace, self.relation.name


@dataclass(frozen=True)
class TableTruncate:
    relations: tuple[Relation, ...]
    commit_timestamp: datetime


Change = RowChange | TableTruncate


def row(relation: Relation, values: tuple[RawValue, ...]) -> Row:
    """The tuple's values by column name, text converted to JSON values."""
    return {
        column.name: value if value is Toast.UNCHANGED else json_value(column.type_oid, value)
        for column, value in zip(relation.columns, values, strict=True)
    }


class Decoder:
    """Follows a slot's message stream across reads: relations stay known between calls (the
    server announces a relation once per decoding session, before its first change)."""

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self._begin: Begin | None = None

    def decode(self, messages: Iterable[bytes]) -> list[Change]:
        changes = []
        for data in messages:
            message = parse_message(data)
            try:
                change = self._apply(message)
            except RecursionError:
                # Postgres stores json nested deeper than json.loads can read: that row's change
                # is dropped, not the stream (the messages after it are still this one's).
                logger.warning(
                    "row change dropped: a json value nested too deep to decode",
                    extra={"relation_oid": getattr(message, "relation_oid", None)},
                )
                continue
            if change is not None:
                changes.append(change)
        return changes

    def _apply(self, message: Message) -> Change | None:
        if isinstance(message, Relation):
            self.relations[message.oid] = message
            return None
        if isinstance(message, Begin):
            self._begin = message
            return None
        if isinstance(message, Commit):
            self._begin = None
            return None
        if isinstance(message, Skipped):
            return None
        if self._begin is None:
            raise PgoutputError(f"{type(message).__name__} outside a transaction")
        at = self._begin.commit_timestamp
        if isinstance(message, Truncate):
            return TableTruncate(tuple(self._of(o) for o in message.relation_oids), at)
        relation = self._of(message.relation_oid)
        if isinstance(message, Insert):
            return RowChange("INSERT", relation, at, row(relation, message.new), {})
        if isinstance(message, Update):
            old = _old_row(relation, message.old) if message.old is not None else {}
            return RowChange("UPDATE", relation, at, row(relation, message.new), old)
        return RowChange("DELETE", relation, at, {}, _old_row(relation, message.old))

    def _of(self, oid: int) -> Relation:
        try:
            return self.relations[oid]
        except KeyError:
            raise PgoutputError(f"change to relation {oid} before its Relation message") from None


def _old_row(relation: Relation, old: OldTuple) -> Row:
    """The old tuple's values; of a key tuple, only the key's (the others are sent as nulls)."""
    values = row(relation, old.values)
    if old.kind == "O":
        return values
    return {c.name: values[c.name] for c in relation.columns if c.part_of_key}
