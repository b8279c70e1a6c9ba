"""Real Postgres for every test: a fresh database per test (see tests/databases.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress

import boto3
import psycopg
import pytest
from moto import mock_aws
from mypy_boto3_s3 import S3Client
from psycopg.conninfo import conninfo_to_dict

from infra.db import Pool, create_pool
from tests.databases import fresh_database, migrated_template, resolve_server_url
from tests.pg_servers import restartable_postgres
from tests.support import TOOL_OUTPUT_BUCKET, fetch


@pytest.fixture(scope="session")
def server_url() -> str:
    return resolve_server_url()


@pytest.fixture(scope="session")
async def template_name(server_url: str) -> AsyncIterator[str]:
    async with migrated_template(server_url) as name:
        yield name


@pytest.fixture
async def database_url(server_url: str, template_name: str) -> AsyncIterator[str]:
    async with fresh_database(server_url, template_name) as url:
        yield url


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    """The app's own pool on the test's database, for store and turn tests without a stack."""
    pool = create_pool(database_url, max_size=2)
    await pool.open()
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
async def logical_server_url(server_url: str) -> AsyncIterator[str]:
    """A server that decodes its WAL logically: the session's when it does (the embedded one
    always does), else one started for the session."""
    [row] = await fetch(server_url, "show wal_level")
    if row["wal_level"] == "logical":
        yield server_url
        return
    async with restartable_postgres("wal_level = logical\n") as server:
        yield server.url()


@pytest.fixture(scope="session")
async def logical_template_name(
    logical_server_url: str, server_url: str, template_name: str
) -> AsyncIterator[str]:
    if logical_server_url == server_url:
        yield template_name
        return
    async with migrated_template(logical_server_url) as name:
        yield name


@pytest.fixture
async def logical_database_url(
    logical_server_url: str, logical_template_name: str
) -> AsyncIterator[str]:
    """A fresh migrated database, as `database_url`, on a server with wal_level=logical (for
    logical replication slots). Slots left in it are dropped with it."""
    async with fresh_database(logical_server_url, logical_template_name) as url:
        yield url
        await drop_slots(logical_server_url, str(conninfo_to_dict(url)["dbname"]))


# A database with a replication slot cannot be dropped. A temporary slot goes with its session,
# but only once the server process behind the closed connection has exited.
SLOTS_OF_SQL = "select slot_name, active_pid from pg_replication_slots where database = %s"
TERMINATE_SQL = "select pg_terminate_backend(%s)"
DROP_SLOT_SQL = "select pg_drop_replication_slot(%s)"


async def drop_slots(server_url: str, dbname: str) -> None:
    async with (
        await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn,
        asyncio.timeout(20),
    ):
        while slots := await (await conn.execute(SLOTS_OF_SQL, (dbname,))).fetchall():
            for name, pid in slots:
                if pid is None:
                    with suppress(psycopg.errors.UndefinedObject):  # gone meanwhile
                        await conn.execute(DROP_SLOT_SQL, (name,))
                else:
                    await conn.execute(TERMINATE_SQL, (pid,))
            # Polls: a terminated server process signals nothing to this connection.
            await asyncio.sleep(0.01)


@pytest.fixture(scope="session")
async def replica_database_url() -> AsyncIterator[str]:
    """A migrated database on a server of the session's own with wal_level=replica (no logical
    decoding), shared by the tests that need one."""
    async with (
        restartable_postgres("wal_level = replica\n") as server,
        migrated_template(server.url()) as name,
    ):
        yield server.url(name)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Client]:
    """S3 through moto, with the bucket for large tool outputs (TOOL_OUTPUT_BUCKET)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(
            Bucket=TOOL_OUTPUT_BUCKET,
            CreateBucketConfiguration={"LocationConstraint": "eu-west-1"},
        )
        yield client
