"""pgoutput's messages (proto_version 1), parsed from bytes; no I/O.

Each row of `pg_logical_slot_get_binary_changes(slot, ..., 'proto_version', '1', ...)` holds one
protocol message; `parse_message` reads one, its column values still the text Postgres sent.

See https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

# Timestamps on the wire count microseconds from the Postgres epoch.
POSTGRES_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


class PgoutputError(ValueError):
    """The bytes are not a pgoutput message this parser understands."""


class Toast(enum.Enum):
    """A column whose value did not change and was not sent (stored out of line, TOAST)."""

    UNCHANGED = "u"


# A column's text as sent: None for NULL, Toast.UNCHANGED when it was left out.
RawValue = str | None | Toast


@dataclass(frozen=True)
class Begin:
    final_lsn: int
    commit_timestamp: datetime
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_timestamp: datetime


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    part_of_key: bool


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Insert:
    relation_oid: int
    new: tuple[RawValue, ...]


# Which old tuple came: the replica identity's columns (K, others null) or the whole row (O,
# replica identity full).
OldKind = Literal["K", "O"]


@dataclass(frozen=True)
class OldTuple:
    kind: OldKind
    values: tuple[RawValue, ...]


@dataclass(frozen=True)
class Update:
    relation_oid: int
    old: OldTuple | None  # sent only when the identity changed, or with replica identity full
    new: tuple[RawValue, ...]


@dataclass(frozen=True)
class Delete:
    relation_oid: int
    old: OldTuple


@dataclass(frozen=True)
class Truncate:
    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True)
class Skipped:
    """A message kind that carries no row change: Origin (O), Type (Y), Message (M)."""

    kind: str


Message = Begin | Commit | Relation | Insert | Update | Delete | Truncate | Skipped
SKIPPED_KINDS = frozenset({"O", "Y", "M"})


# Network byte order: signed 8, 16, 32 and 64 bit integers, and unsigned 32 bit ones (oids, xids).
I8, I16, I32, I64, U32 = (struct.Struct(f) for f in ("!b", "!h", "!i", "!q", "!I"))


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def _take(self, size: int) -> bytes:
        end = self._at + size
        if end > len(self._data):
            raise PgoutputError(f"message ends at byte {len(self._data)}, needed {end}")
        chunk = self._data[self._at : end]
        self._at = end
        return chunk

    def number(self, layout: struct.Struct) -> int:
        value: int = layout.unpack(self._take(layout.size))[0]
        return value

    def byte(self) -> str:
        return self._take(1).decode("ascii")

    def string(self) -> str:
        end = self._data.find(b"\0", self._at)
        if end < 0:
            raise PgoutputError("unterminated string")
        text = self._data[self._at : end].decode()
        self._at = end + 1
        return text

    def timestamp(self) -> datetime:
        return POSTGRES_EPOCH + timedelta(microseconds=self.number(I64))

    def tuple_data(self) -> tuple[RawValue, ...]:
        values: list[RawValue] = []
        for _ in range(self.number(I16)):
            kind = self.byte()
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(Toast.UNCHANGED)
            elif kind == "t":
                values.append(self._take(self.number(I32)).decode())
            else:  # 'b' only comes with the `binary` option, which this protocol use never sets
                raise PgoutputError(f"unsupported tuple column kind {kind!r}")
        return tuple(values)


def parse_message(data: bytes) -> Message:
    """One pgoutput message, as a row of pg_logical_slot_get_binary_changes holds it."""
    reader = _Reader(bytes(data))
    kind = reader.byte()
    if kind == "B":
        return Begin(reader.number(I64), reader.timestamp(), reader.number(U32))
    if kind == "C":
        reader.number(I8)  # flags, unused
        return Commit(reader.number(I64), reader.number(I64), reader.timestamp())
    if kind == "R":
        return _relation(reader)
    if kind == "I":
        oid = reader.number(U32)
        if (marker := reader.byte()) != "N":
            raise PgoutputError(f"expected the new tuple, got {marker!r}")
        return Insert(oid, reader.tuple_data())
    if kind == "U":
        oid = reader.number(U32)
        marker = reader.byte()
        old = _old_tuple(reader, marker)
        if old is not None:
            marker = reader.byte()
        if marker != "N":
            raise PgoutputError(f"expected the new tuple, got {marker!r}")
        return Update(oid, old, reader.tuple_data())
    if kind == "D":
        oid = reader.number(U32)
        marker = reader.byte()
        if (old := _old_tuple(reader, marker)) is None:
            raise PgoutputError(f"expected the old tuple, got {marker!r}")
        return Delete(oid, old)
    if kind == "T":
        count, options = reader.number(I32), reader.number(I8)
        oids = tuple(reader.number(U32) for _ in range(count))
        return Truncate(oids, cascade=bool(options & 1), restart_identity=bool(options & 2))
    if kind in SKIPPED_KINDS:
        return Skipped(kind)
    raise PgoutputError(f"unknown message kind {kind!r}")


def _old_tuple(reader: _Reader, marker: str) -> OldTuple | None:
    if marker == "K":
        return OldTuple("K", reader.tuple_data())
    if marker == "O":
        return OldTuple("O", reader.tuple_data())
    return None


def _relation(reader: _Reader) -> Relation:
    oid, namespace, name = reader.number(U32), reader.string(), reader.string()
    identity = chr(reader.number(I8))
    columns = []
    for _ in range(reader.number(I16)):
        flags = reader.number(I8)
        columns.append(
            Column(reader.string(), reader.number(U32), reader.number(I32), bool(flags & 1))
        )
    return Relation(oid, namespace or "pg_catalog", name, identity, tuple(columns))
