"""The pgoutput logical replication protocol (proto_version 1), decoded; no I/O.

`messages` parses one protocol message from its bytes; `rows` follows a stream of them and turns
row messages into `RowChange`s of JSON values, as Supabase Realtime converts them. The I/O (the
slot, its polling) is the change feed's (devkit/change_feed/).
"""

from devkit.pgoutput.messages import (
    Begin,
    Column,
    Commit,
    Delete,
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
from devkit.pgoutput.rows import (
    BOOL_OID,
    Change,
    Decoder,
    Row,
    RowChange,
    TableTruncate,
    json_value,
    row,
)

__all__ = [
    "BOOL_OID",
    "Begin",
    "Change",
    "Column",
    "Commit",
    "Decoder",
    "Delete",
    "Insert",
    "Message",
    "OldTuple",
    "PgoutputError",
    "RawValue",
    "Relation",
    "Row",
    "RowChange",
    "Skipped",
    "TableTruncate",
    "Toast",
    "Truncate",
    "Update",
    "json_value",
    "parse_message",
    "row",
]
