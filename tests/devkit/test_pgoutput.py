"""The pgoutput parser, on messages a real server sends for real transactions."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from devkit.pgoutput import (
    Begin,
    Column,
    Commit,
    Decoder,
    Insert,
    PgoutputError,
    Relation,
    RowChange,
    Skipped,
    TableTruncate,
    Toast,
    json_value,
    parse_message,
)

# One transaction as PostgreSQL 18.6 sent it for `insert into t values (1, 'a')` on
# `create table t (id int primary key, x text)`, committed by a session whose replication
# origin was `elsewhere`: Begin, Origin, Relation, Insert, Commit.
CAPTURED = [
    "4200000000016f4b68000303de9d944844000002f3",
    "4f0000000000000000656c7365776865726500",
    "52000040007075626c69630074006400020169640000000017ffffffff00780000000019ffffffff",
    "49000040004e0002740000000131740000000161",
    "430000000000016f4b6800000000016f4bb0000303de9d944844",
]
CAPTURED_COMMIT_AT = datetime(2026, 11, 22, 16, 19, 51, 495748, tzinfo=UTC)

PUBLICATION = "pgoutput_test"
SLOT = "pgoutput_test"
SETUP_SQL = f"""
create type mood as enum ('ok', 'sad');
create table sample (
  id int primary key,
  flag bool, small int2, big int8, single float4, double float8, amount numeric,
  doc json, docb jsonb, body text, ref uuid, at timestamptz, tags int[], feeling mood
);
create publication {PUBLICATION} for table sample;
"""
CREATE_SLOT_SQL = "select pg_create_logical_replication_slot(%s, 'pgoutput', temporary => true)"
CHANGES_SQL = """
select xid, data from pg_logical_slot_get_binary_changes(
  %s, null, null, 'proto_version', '1', 'publication_names', %s, 'messages', 'true')
"""


@dataclass
class Server:
    """A database with the sample table published and a slot on it."""

    slot_conn: psycopg.AsyncConnection[dict[str, Any]]
    writer: psycopg.AsyncConnection[dict[str, Any]]

    async def run(self, *statements: str) -> None:
        for statement in statements:
            await self.writer.execute(statement)

    async def run_with(self, statement: str, *params: Any) -> None:
        await self.writer.execute(statement, params)

    async def messages(self) -> list[bytes]:
        rows = await (await self.slot_conn.execute(CHANGES_SQL, (SLOT, PUBLICATION))).fetchall()
        return [bytes(r["data"]) for r in rows]

    async def changes(self) -> list[Any]:
        return Decoder().decode(await self.messages())


@pytest.fixture
async def server(logical_database_url: str) -> AsyncIterator[Server]:
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(logical_database_url, autocommit=True, row_factory=dict_row) as slot_conn,
        await connect(logical_database_url, autocommit=True, row_factory=dict_row) as writer,
    ):
        await writer.execute(SETUP_SQL)
        # Timestamps are decoded in the decoding session's time zone.
        await slot_conn.execute("set timezone = 'UTC'")
        await slot_conn.execute(CREATE_SLOT_SQL, (SLOT,))
        yield Server(slot_conn, writer)
        await slot_conn.execute("select pg_drop_replication_slot(%s)", (SLOT,))


def test_a_captured_transaction_decodes_exactly() -> None:
    messages = [parse_message(bytes.fromhex(h)) for h in CAPTURED]

    begin, origin, relation, insert, commit = messages
    assert begin == Begin(final_lsn=0x16F4B68, commit_timestamp=CAPTURED_COMMIT_AT, xid=755)
    assert origin == Skipped("O")
    assert relation == Relation(
        oid=0x4000,
        namespace="public",
        name="t",
        replica_identity="d",
        columns=(Column("id", 23, -1, part_of_key=True), Column("x", 25, -1, part_of_key=False)),
    )
    assert insert == Insert(0x4000, ("1", "a"))
    assert commit == Commit(0x16F4B68, 0x16F4BB0, CAPTURED_COMMIT_AT)
    [change] = Decoder().decode(bytes.fromhex(h) for h in CAPTURED)
    assert change == RowChange("INSERT", relation, CAPTURED_COMMIT_AT, {"id": 1, "x": "a"}, {})


async def test_an_insert_carries_typed_values_and_its_commit(server: Server) -> None:
    # GIVEN a row with a value of every kind Realtime types, and a few it sends as text
    await server.run(
        "insert into sample values (1, true, -2, 9007199254740993, 1.5, 0.25, 12.50,"
        " '{\"a\": [1, 2]}', '{\"b\": null}', 'text', '00000000-0000-0000-0000-00000000000a',"
        " '2026-01-02 03:04:05.6+00', '{1,2}', 'sad')"
    )
    # WHEN its messages are parsed
    raw = await server.messages()
    messages = [parse_message(m) for m in raw]

    # THEN the transaction brackets the row, with one commit time
    kinds = [type(m).__name__ for m in messages]
    assert kinds[0] == "Begin"
    assert kinds[-1] == "Commit"
    assert "Skipped" in kinds  # the enum's Type message
    begin, commit = messages[0], messages[-1]
    assert isinstance(begin, Begin)
    assert isinstance(commit, Commit)
    assert begin.commit_timestamp == commit.commit_timestamp
    assert begin.final_lsn == commit.commit_lsn
    # AND the relation names its columns, the key flagged
    [relation] = [m for m in messages if isinstance(m, Relation)]
    assert (relation.namespace, relation.name) == ("public", "sample")
    assert [c.name for c in relation.columns if c.part_of_key] == ["id"]
    # AND the values are JSON values as Realtime sends them
    [change] = Decoder().decode(raw)
    assert isinstance(change, RowChange)
    assert change.kind == "INSERT"
    assert change.new == {
        "id": 1,
        "flag": True,
        "small": -2,
        "big": 9007199254740993,
        "single": 1.5,
        "double": 0.25,
        "amount": 12.5,
        "doc": {"a": [1, 2]},
        "docb": {"b": None},
        "body": "text",
        "ref": "00000000-0000-0000-0000-00000000000a",
        "at": "2026-01-02 03:04:05.6+00",
        "tags": "{1,2}",
        "feeling": "sad",
    }


async def test_nulls_and_values_json_cannot_hold(server: Server) -> None:
    await server.run(
        "insert into sample (id, single, double, amount) values (2, 'NaN', '-Infinity', 'NaN')"
    )
    [change] = await server.changes()
    assert isinstance(change, RowChange)
    assert change.new["flag"] is None
    assert change.new["body"] is None
    assert (change.new["single"], change.new["double"], change.new["amount"]) == (
        "NaN",
        "-Infinity",
        "NaN",
    )


async def test_updates_and_deletes_carry_the_old_tuple_the_identity_sends(server: Server) -> None:
    await server.run(
        "insert into sample (id, body) values (3, 'three')",
        # Default identity, key unchanged: no old tuple
        "update sample set body = 'drei' where id = 3",
        # Key changed: the old key (K)
        "update sample set id = 4 where id = 3",
        "delete from sample where id = 4",
        # Identity full: the whole old row (O)
        "insert into sample (id, body) values (5, 'five')",
        "alter table sample replica identity full",
        "update sample set body = 'fünf' where id = 5",
    )
    _, plain, rekeyed, deleted, _, full = await server.changes()
    assert (plain.kind, plain.old, plain.new["body"]) == ("UPDATE", {}, "drei")
    assert (rekeyed.kind, rekeyed.old, rekeyed.new["id"]) == ("UPDATE", {"id": 3}, 4)
    assert (deleted.kind, deleted.old, deleted.new) == ("DELETE", {"id": 4}, {})
    assert full.old["body"] == "five"
    assert full.old["id"] == 5
    assert full.new["body"] == "fünf"


async def test_an_unchanged_out_of_line_value_is_marked_not_sent(server: Server) -> None:
    # Random hex does not compress, so it is stored out of line (TOAST).
    body = secrets.token_hex(8000)
    await server.run_with("insert into sample (id, body) values (6, %s)", body)
    await server.run("update sample set flag = true where id = 6")
    inserted, updated = await server.changes()
    assert inserted.new["body"] == body
    assert updated.new["body"] is Toast.UNCHANGED
    assert updated.new["flag"] is True


async def test_truncate_names_its_tables(server: Server) -> None:
    await server.run("insert into sample (id) values (7)", "truncate sample")
    inserted, truncated = await server.changes()
    assert isinstance(truncated, TableTruncate)
    assert [r.name for r in truncated.relations] == ["sample"]
    assert truncated.relations[0] == inserted.relation


async def test_logical_messages_and_origins_are_skipped(server: Server) -> None:
    await server.run(
        "select pg_logical_emit_message(true, 'note', 'hello')",
        "select pg_replication_origin_create('elsewhere')",
        "select pg_replication_origin_session_setup('elsewhere')",
        "insert into sample (id) values (8)",
        "select pg_replication_origin_session_reset()",
        "select pg_replication_origin_drop('elsewhere')",
    )
    messages = await server.messages()
    kinds = [m[:1] for m in messages]
    assert b"M" in kinds
    assert b"O" in kinds
    assert Skipped("M") in [parse_message(m) for m in messages]
    [change] = Decoder().decode(messages)
    assert isinstance(change, RowChange)
    assert change.new["id"] == 8


def test_json_values_by_type() -> None:
    assert json_value(16, "f") is False
    assert json_value(20, "-12") == -12
    assert json_value(1700, "1e3") == 1000.0
    assert json_value(3802, "[1]") == [1]
    assert json_value(1082, "2026-01-02") == "2026-01-02"
    assert json_value(23, None) is None


@pytest.mark.parametrize(
    "data",
    [b"Z", b"B\x00\x00", b"I\x00\x00@\x00X", b"R\x00\x00@\x00public"],
    ids=["unknown kind", "cut short", "no new tuple", "unterminated name"],
)
def test_malformed_messages_are_refused(data: bytes) -> None:
    with pytest.raises(PgoutputError):
        parse_message(data)


def test_a_change_before_its_relation_is_refused() -> None:
    begin, _, _, insert, _ = (bytes.fromhex(h) for h in CAPTURED)
    with pytest.raises(PgoutputError, match="before its Relation"):
        Decoder().decode([begin, insert])
