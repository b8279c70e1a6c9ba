"""Who may read from and write to a private channel, asked of the RLS policies on
`realtime.messages` as Realtime asks them (Realtime.Tenants.Authorization).

To read: probe rows for the topic are inserted by the server's own role, then selected as the
subscriber, with `realtime.topic()` returning the topic; what the policies let through is allowed,
and the transaction is rolled back. To write: a row is inserted as the subscriber, in a
transaction that is rolled back; an RLS violation means no.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from infra.db import Pool

EXTENSIONS = ("broadcast", "presence")
PROBE_SQL = "insert into realtime.messages (id, topic, extension) values (%s, %s, %s)"
# Realtime's set_conn_config: the role, the topic and the request's claims. (Not its
# request.jwt.claim.sub: see postgres_changes.AS_SUBSCRIBER_SQL.)
CONFIG_SQL = """
select set_config('role', %(role)s, true), set_config('realtime.topic', %(topic)s, true),
  set_config('request.jwt.claims', %(claims)s, true)
"""
READ_SQL = "select id from realtime.messages where id = any(%s)"
WRITE_SQL = "insert into realtime.messages (topic, extension) values (%s, %s)"


class PolicyError(RuntimeError):
    """The policies could not be evaluated (a broken policy, an unknown role)."""


@dataclass(frozen=True)
class ReadPolicies:
    broadcast: bool
    presence: bool | None  # None: not asked (presence was not enabled)


def _config(topic: str, claims: dict[str, Any]) -> dict[str, str]:
    return {"role": str(claims.get("role", "")), "topic": topic, "claims": json.dumps(claims)}


async def read_policies(
    pool: Pool, topic: str, claims: dict[str, Any], *, presence: bool
) -> ReadPolicies:
    extensions = EXTENSIONS if presence else EXTENSIONS[:1]
    probes = {extension: uuid.uuid4() for extension in extensions}
    try:
        async with pool.connection() as conn, conn.transaction(force_rollback=True):
            for extension, probe in probes.items():
                await conn.execute(PROBE_SQL, (probe, topic, extension))
            await conn.execute(CONFIG_SQL, _config(topic, claims))
            rows = await (await conn.execute(READ_SQL, (list(probes.values()),))).fetchall()
    except psycopg.Error as error:
        raise PolicyError(str(error)) from error
    seen = {row["id"] for row in rows}
    return ReadPolicies(
        broadcast=probes["broadcast"] in seen,
        presence=(probes["presence"] in seen) if presence else None,
    )


async def may_read(pool: Pool, topic: str, claims: dict[str, Any]) -> bool:
    """Whether the read policies let the subscriber read the channel's broadcasts now: asked
    again before each batch of them is delivered, as the policies may have changed since the
    join (a member removed from a chat), the way Postgres Changes check RLS per change."""
    return (await read_policies(pool, topic, claims, presence=False)).broadcast


async def may_broadcast(pool: Pool, topic: str, claims: dict[str, Any]) -> bool:
    try:
        async with pool.connection() as conn, conn.transaction(force_rollback=True):
            await conn.execute(CONFIG_SQL, _config(topic, claims))
            await conn.execute(WRITE_SQL, (topic, "broadcast"))
    except psycopg.errors.InsufficientPrivilege:
        return False
    except psycopg.Error as error:
        raise PolicyError(str(error)) from error
    return True
