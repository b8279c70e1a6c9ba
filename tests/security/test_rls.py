"""Row-level security as the Data API runs it: who may read and write which rows.

Every attempt runs the way PostgREST runs a request (and as `infra.store.access.user_transaction`
does): in a transaction, with `request.jwt.claims` set and `set local role` to the request's
role. The transaction is then rolled back, so every case starts from the same seeded database.

Each case runs on two databases: one migrated on plain Postgres, and one migrated as a Supabase
project is, whose default privileges give `anon` and `authenticated` every privilege on every
table created in `public` (the migrations revoke what they do not mean to grant:
tests/security/test_privileges.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
import pytest
from psycopg import sql

from tests.databases import fresh_database
from tests.support import create_user_with_chat, fetch

Table = Literal[
    "chat",
    "message",
    "message_draft",
    "broadcast_draft",
    "job_runs",
    "reply_usage",
    "chat_assistant",
    "reply_source",
    "cascade",
    "chat_member",
]
Operation = Literal["select", "insert", "update", "delete", "truncate"]
Actor = Literal["owner", "member", "former_member", "other_user", "anon"]
Grants = Literal["our_grants", "supabase_grants"]

TABLES: tuple[Table, ...] = (
    "chat",
    "message",
    "message_draft",
    "broadcast_draft",
    "job_runs",
    "reply_usage",
    "chat_assistant",
    "reply_source",
    "cascade",
    "chat_member",
)
OPERATIONS: tuple[Operation, ...] = ("select", "insert", "update", "delete")
ACTORS: tuple[Actor, ...] = ("owner", "member", "former_member", "other_user", "anon")
GRANTS: tuple[Grants, ...] = ("our_grants", "supabase_grants")

SET_CLAIMS_SQL = "select set_config('request.jwt.claims', %s, true)"
SET_ROLE_SQL = {
    "anon": "set local role anon",
    "authenticated": "set local role authenticated",
}
RESET_ROLE_SQL = "reset role"
# Everything in the tables, as the connecting (owning) role sees it, which RLS does not
# filter: the yardstick for "did this attempt change anything".
SNAPSHOT_SQL = """
select json_build_object(
  'chat', (select json_agg(t order by t.id) from public.chat t),
  'message', (select json_agg(t order by t.id) from public.message t),
  'message_draft', (select json_agg(t order by t.message_id) from public.message_draft t),
  'broadcast_draft', (select json_agg(t order by t.message_id) from public.broadcast_draft t),
  'job_runs', (select json_agg(t order by t.id) from public.job_runs t),
  'reply_usage', (select json_agg(t order by t.message_id) from public.reply_usage t),
  'chat_assistant', (
    select json_agg(t order by t.chat_id, t.assistant_id) from public.chat_assistant t
  ),
  'reply_source', (
    select json_agg(t order by t.reply_id, t.message_id) from public.reply_source t
  ),
  'cascade', (select json_agg(t order by t.id) from public.cascade t),
  'chat_member', (select json_agg(t order by t.chat_id, t.user_id) from public.chat_member t)
) as tables
"""
CHAT_COLUMN: dict[Table, str] = {
    "chat": "id",
    "message": "chat_id",
    "message_draft": "chat_id",
    "broadcast_draft": "chat_id",
    "job_runs": "chat_id",
    "reply_usage": "chat_id",
    "chat_assistant": "chat_id",
    "reply_source": "chat_id",
    "cascade": "chat_id",
    "chat_member": "chat_id",
}
# Writes aimed at the owner's rows. The same statement is tried by every actor, so a refusal
# for the other user means something only because the owner may run it (where the owner may).
WRITE_SQL: dict[tuple[Table, Operation], str | sql.Composed] = {
    ("chat", "insert"): "insert into public.chat (user_id, title) values (%(user)s, 'planted')",
    ("chat", "update"): "update public.chat set title = 'changed' where id = %(chat)s",
    ("chat", "delete"): "delete from public.chat where id = %(chat)s",
    ("message", "insert"): (
        "insert into public.message (chat_id, role, content) values (%(chat)s, 'user', 'planted')"
    ),
    ("message", "update"): "update public.message set content = 'changed' where chat_id = %(chat)s",
    ("message", "delete"): "delete from public.message where chat_id = %(chat)s",
    ("message_draft", "insert"): (
        "insert into public.message_draft (message_id, chat_id, draft_content)"
        " values (%(user_message)s, %(chat)s, 'planted')"
    ),
    ("message_draft", "update"): (
        "update public.message_draft set draft_content = 'changed', seq = seq + 1"
        " where chat_id = %(chat)s"
    ),
    ("message_draft", "delete"): "delete from public.message_draft where chat_id = %(chat)s",
    ("broadcast_draft", "insert"): (
        "insert into public.broadcast_draft (message_id, chat_id, draft_content)"
        " values (%(user_message)s, %(chat)s, 'planted')"
    ),
    ("broadcast_draft", "update"): (
        "update public.broadcast_draft set draft_content = 'changed', seq = seq + 1"
        " where chat_id = %(chat)s"
    ),
    ("broadcast_draft", "delete"): "delete from public.broadcast_draft where chat_id = %(chat)s",
    ("job_runs", "insert"): (
        "insert into public.job_runs"
        " (chat_id, root_message_id, status, event_name, idempotency_key, payload)"
        " values (%(chat)s, %(user_message)s, 'completed', 'chat/tool_handoff', 'planted', '{}')"
    ),
    ("job_runs", "update"): (
        "update public.job_runs set status = 'canceled' where chat_id = %(chat)s"
    ),
    ("job_runs", "delete"): "delete from public.job_runs where chat_id = %(chat)s",
    ("reply_usage", "insert"): (
        "insert into public.reply_usage (message_id, user_id, chat_id, input_tokens)"
        " values (gen_random_uuid(), %(user)s, %(chat)s, 0)"
    ),
    ("reply_usage", "update"): (
        "update public.reply_usage set input_tokens = 0 where chat_id = %(chat)s"
    ),
    ("reply_usage", "delete"): "delete from public.reply_usage where chat_id = %(chat)s",
    ("chat_assistant", "insert"): (
        "insert into public.chat_assistant (chat_id, assistant_id) values (%(chat)s, 'planted')"
    ),
    ("chat_assistant", "update"): (
        "update public.chat_assistant set is_default = not is_default where chat_id = %(chat)s"
    ),
    ("chat_assistant", "delete"): "delete from public.chat_assistant where chat_id = %(chat)s",
    ("reply_source", "insert"): (
        "insert into public.reply_source (reply_id, message_id, chat_id, kind)"
        " values (%(user_message)s, %(user_message)s, %(chat)s, 'context')"
    ),
    ("reply_source", "update"): (
        "update public.reply_source set kind = 'context' where chat_id = %(chat)s"
    ),
    ("reply_source", "delete"): "delete from public.reply_source where chat_id = %(chat)s",
    ("cascade", "insert"): (
        "insert into public.cascade (id, chat_id, user_id, edited_message_id, replacement_id)"
        " values (gen_random_uuid(), %(chat)s, %(user)s, %(user_message)s, %(user_message)s)"
    ),
    ("cascade", "update"): (
        "update public.cascade set decision = 'approved' where chat_id = %(chat)s"
    ),
    ("cascade", "delete"): "delete from public.cascade where chat_id = %(chat)s",
    ("chat_member", "insert"): (
        "insert into public.chat_member (chat_id, user_id) values (%(chat)s, %(user)s)"
    ),
    ("chat_member", "update"): (
        "update public.chat_member set added_by = user_id where chat_id = %(chat)s"
    ),
    ("chat_member", "delete"): "delete from public.chat_member where chat_id = %(chat)s",
    # Row-level security does not filter a truncate: the privilege alone decides.
    **{
        (table, "truncate"): sql.SQL("truncate {} cascade").format(sql.Identifier("public", table))
        for table in TABLES
    },
}
CLOSED_RELATIONS = (
    "langgraph.checkpoints",
    "langgraph.checkpoint_blobs",
    "langgraph.checkpoint_writes",
    "langgraph.checkpoint_migrations",
    "handoff.erased_object",
    "handoff.erased_turn",
    "handoff.migrations",
    "handoff.tool_results",
    "handoff.user_limits",
)
CLOSED_SCHEMAS = ("langgraph", "handoff")
TABLES_IN_SCHEMAS_SQL = """
select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = any(%s) and c.relkind in ('r', 'p', 'v', 'm', 'f')
"""
# Every relation a role could touch through the Data API (outside the system catalogs), and
# whether row-level security guards it.
REACHABLE_SQL = """
select n.nspname || '.' || c.relname as name, c.relrowsecurity as rls
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'p', 'v', 'm', 'f')
  and n.nspname not in ('pg_catalog', 'information_schema')
  and has_schema_privilege(%(role)s, n.oid, 'USAGE')
  and has_table_privilege(%(role)s, c.oid, 'SELECT, INSERT, UPDATE, DELETE')
"""
SEED_MESSAGE_SQL = """
insert into public.message (id, chat_id, role, content, status, parent_message_id, sender_id)
values (%s, %s, %s, %s, %s, %s, %s)
"""
SEED_MEMBER_SQL = "insert into public.chat_member (chat_id, user_id, added_by) values (%s, %s, %s)"
SEED_USER_SQL = "insert into auth.users (id, email) values (%s, %s)"
REMOVE_MEMBER_SQL = "delete from public.chat_member where chat_id = %s and user_id = %s"
SEED_DRAFT_SQL = """
insert into public.message_draft (message_id, chat_id, draft_content, seq) values (%s, %s, 'd', 1)
"""
SEED_BROADCAST_DRAFT_SQL = """
insert into public.broadcast_draft (message_id, chat_id, draft_content, seq) values (%s, %s, 'd', 1)
"""
SEED_JOB_SQL = """
insert into public.job_runs (chat_id, root_message_id, event_name, idempotency_key, payload)
values (%s, %s, 'chat/tool_handoff', %s, '{}')
"""
SEED_CHAT_ASSISTANT_SQL = """
insert into public.chat_assistant (chat_id, assistant_id, is_default) values (%s, 'seeded', true)
"""
SEED_SOURCE_SQL = """
insert into public.reply_source (reply_id, message_id, chat_id, kind) values (%s, %s, %s, 'started')
"""
SEED_CASCADE_SQL = """
insert into public.cascade (id, chat_id, user_id, edited_message_id, replacement_id)
values (gen_random_uuid(), %s, %s, %s, %s)
"""
SEED_USAGE_SQL = """
insert into public.reply_usage (message_id, user_id, chat_id, model, input_tokens, output_tokens)
values (%s, %s, %s, 'scripted', 12, 34)
"""


def may(actor: Actor, table: Table, operation: Operation) -> bool:
    """The policy under test: owners read everything of theirs, and rename and delete chats
    (they create them through the API, which counts them against MAX_CHATS_PER_MINUTE); members
    read everything of the chat and delete their own messages (the seeded chat holds one of
    theirs); messages, drafts, jobs, usage, members, a chat's assistants, reply sources and
    cascades are written by the service only; nobody truncates anything; a former member, like
    anyone else, touches none of it."""
    if actor not in ("owner", "member") or operation == "truncate":
        return False
    if operation == "select":
        return True
    if table == "message":
        return operation == "delete"
    return actor == "owner" and table == "chat" and operation != "insert"


@dataclass(frozen=True)
class ChatRows:
    """A user's chat with a turn in flight: their message, the queued reply, its draft, the job
    and the reply's usage."""

    user_id: uuid.UUID
    chat_id: uuid.UUID
    user_message_id: uuid.UUID
    reply_id: uuid.UUID

    @property
    def params(self) -> dict[str, uuid.UUID]:
        return {"user": self.user_id, "chat": self.chat_id, "user_message": self.user_message_id}


@dataclass(frozen=True)
class World:
    """The owner's chat has a member, who sent a message there and whose turn used tokens, and
    a former member, who sent one too before the owner removed them."""

    database_url: str
    owner: ChatRows
    other_user: ChatRows
    member: uuid.UUID
    former_member: uuid.UUID


@dataclass(frozen=True)
class Outcome:
    refused: str | None  # the database's error message, when it raised one
    rows: list[tuple[Any, ...]]
    rowcount: int
    changed: bool


async def seed_chat_rows(database_url: str) -> ChatRows:
    user_id, chat_id = await create_user_with_chat(database_url)
    user_message_id, reply_id = uuid.uuid4(), uuid.uuid4()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            SEED_MESSAGE_SQL, (user_message_id, chat_id, "user", "hi", "completed", None, user_id)
        )
        await conn.execute(
            SEED_MESSAGE_SQL, (reply_id, chat_id, "assistant", "", "queued", None, None)
        )
        await conn.execute(SEED_DRAFT_SQL, (reply_id, chat_id))
        await conn.execute(SEED_BROADCAST_DRAFT_SQL, (reply_id, chat_id))
        await conn.execute(SEED_JOB_SQL, (chat_id, reply_id, str(uuid.uuid4())))
        await conn.execute(SEED_USAGE_SQL, (reply_id, user_id, chat_id))
        await conn.execute(SEED_CHAT_ASSISTANT_SQL, (chat_id,))
        await conn.execute(SEED_SOURCE_SQL, (reply_id, user_message_id, chat_id))
        await conn.execute(SEED_CASCADE_SQL, (chat_id, user_id, user_message_id, user_message_id))
    return ChatRows(user_id, chat_id, user_message_id, reply_id)


async def seed_member(database_url: str, owner: ChatRows, *, removed: bool) -> uuid.UUID:
    """A user added to the owner's chat, with a message of theirs there and its reply's usage
    (theirs); with `removed`, the owner has removed them since."""
    member = uuid.uuid4()
    message_id, reply_id = uuid.uuid4(), uuid.uuid4()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(SEED_USER_SQL, (member, f"{member}@test"))
        await conn.execute(SEED_MEMBER_SQL, (owner.chat_id, member, owner.user_id))
        await conn.execute(
            SEED_MESSAGE_SQL,
            (message_id, owner.chat_id, "user", "mine", "completed", None, member),
        )
        await conn.execute(
            SEED_MESSAGE_SQL,
            (reply_id, owner.chat_id, "assistant", "", "completed", message_id, None),
        )
        if not removed:
            await conn.execute(SEED_USAGE_SQL, (reply_id, member, owner.chat_id))
        else:
            await conn.execute(REMOVE_MEMBER_SQL, (owner.chat_id, member))
    return member


async def seed_world(database_url: str) -> World:
    owner = await seed_chat_rows(database_url)
    other_user = await seed_chat_rows(database_url)
    member = await seed_member(database_url, owner, removed=False)
    former = await seed_member(database_url, owner, removed=True)
    await seed_member(database_url, other_user, removed=False)
    return World(database_url, owner, other_user, member, former)


@pytest.fixture(scope="module")
async def worlds(
    server_url: str, template_name: str, supabase_template_name: str
) -> AsyncIterator[dict[Grants, World]]:
    # One database of each for the whole matrix: every attempt is rolled back.
    async with (
        fresh_database(server_url, template_name) as ours,
        fresh_database(server_url, supabase_template_name) as supabase,
    ):
        urls: dict[Grants, str] = {"our_grants": ours, "supabase_grants": supabase}
        yield {grants: await seed_world(url) for grants, url in urls.items()}


@pytest.fixture(scope="module")
def world(worlds: dict[Grants, World]) -> World:
    return worlds["supabase_grants"]


def claims_for(actor: Actor, world: World) -> tuple[str, dict[str, Any]]:
    if actor == "anon":
        return "anon", {"role": "anon"}
    user = {
        "owner": world.owner.user_id,
        "member": world.member,
        "former_member": world.former_member,
        "other_user": world.other_user.user_id,
    }[actor]
    return "authenticated", {"sub": str(user), "role": "authenticated"}


async def snapshot(conn: psycopg.AsyncConnection[Any]) -> Any:
    row = await (await conn.execute(SNAPSHOT_SQL)).fetchone()
    assert row is not None
    return row[0]


async def attempt(
    world: World,
    actor: Actor,
    statement: str | sql.Composed,
    params: dict[str, Any] | None = None,
) -> Outcome:
    """Run one statement as `actor` would through the Data API, and roll it back."""
    role, claims = claims_for(actor, world)
    async with (
        await psycopg.AsyncConnection.connect(world.database_url, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        before = await snapshot(conn)
        refused, rows, rowcount = None, [], 0
        try:
            async with conn.transaction():
                await conn.execute(SET_CLAIMS_SQL, (json.dumps(claims),))
                await conn.execute(SET_ROLE_SQL[role])
                cursor = await conn.execute(statement, params)
                rows = await cursor.fetchall() if cursor.description else []
                rowcount = cursor.rowcount
                await conn.execute(RESET_ROLE_SQL)
        except psycopg.errors.InsufficientPrivilege as exc:
            refused = exc.diag.message_primary or str(exc)
        return Outcome(refused, rows, rowcount, changed=await snapshot(conn) != before)


@pytest.mark.parametrize("grants", GRANTS)
@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("table", TABLES)
async def test_reading(
    worlds: dict[Grants, World], table: Table, actor: Actor, grants: Grants
) -> None:
    world = worlds[grants]
    # GIVEN two users, each with a chat, messages, a draft and a job
    # WHEN the actor reads the whole table
    query = sql.SQL("select distinct {} from {}").format(
        sql.Identifier(CHAT_COLUMN[table]), sql.Identifier("public", table)
    )
    outcome = await attempt(world, actor, query)
    # THEN they see the rows of the chats they are in, and no one else's
    visible = {row[0] for row in outcome.rows}
    expected = {
        "owner": {world.owner.chat_id},
        "member": {world.owner.chat_id},
        "former_member": set(),
        "other_user": {world.other_user.chat_id},
        "anon": set(),
    }[actor]
    assert visible == expected, outcome


@pytest.mark.parametrize("grants", GRANTS)
@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("operation", ["insert", "update", "delete", "truncate"])
@pytest.mark.parametrize("table", TABLES)
async def test_writing_the_owners_rows(
    worlds: dict[Grants, World], table: Table, operation: Operation, actor: Actor, grants: Grants
) -> None:
    world = worlds[grants]
    # WHEN the actor writes into the owner's chat
    outcome = await attempt(world, actor, WRITE_SQL[table, operation], world.owner.params)
    if may(actor, table, operation):
        # THEN the owner's write lands
        assert outcome.refused is None, outcome
        assert outcome.rowcount >= 1, outcome
        assert outcome.changed, outcome
    else:
        # THEN anyone else is refused outright or finds no row to touch, and nothing changed
        assert outcome.refused is not None or outcome.rowcount == 0, outcome
        assert not outcome.changed, outcome


@pytest.mark.parametrize("grants", GRANTS)
@pytest.mark.parametrize("actor", ["other_user", "anon"])
@pytest.mark.parametrize("relation", CLOSED_RELATIONS)
async def test_checkpoints_and_internal_tables_are_closed(
    worlds: dict[Grants, World], relation: str, actor: Actor, grants: Grants
) -> None:
    schema, table = relation.split(".")
    query = sql.SQL("select * from {}").format(sql.Identifier(schema, table))
    outcome = await attempt(worlds[grants], actor, query)
    assert outcome.refused is not None, outcome
    assert f"permission denied for schema {schema}" in outcome.refused


async def test_the_closed_list_names_every_table_of_the_closed_schemas(world: World) -> None:
    # A table added to langgraph or handoff later joins the matrix above, or this fails.
    async with await psycopg.AsyncConnection.connect(world.database_url) as conn:
        rows = await (await conn.execute(TABLES_IN_SCHEMAS_SQL, (list(CLOSED_SCHEMAS),))).fetchall()
    assert {row[0] for row in rows} == set(CLOSED_RELATIONS)


@pytest.mark.parametrize("grants", GRANTS)
@pytest.mark.parametrize("role", ["anon", "authenticated"])
async def test_every_table_the_api_roles_can_reach_has_row_level_security(
    worlds: dict[Grants, World], role: str, grants: Grants
) -> None:
    async with await psycopg.AsyncConnection.connect(worlds[grants].database_url) as conn:
        rows = await (await conn.execute(REACHABLE_SQL, {"role": role})).fetchall()
    reachable = {name: rls for name, rls in rows}
    assert all(reachable.values()), reachable
    # Besides ours, Supabase's realtime.messages: Realtime asks its policies who may join a
    # private channel (below).
    assert {n for n in reachable if not n.startswith("public.")} <= {"realtime.messages"}, reachable
    if role == "authenticated":
        # Not vacuous: the chat tables are reachable, and guarded.
        assert {f"public.{t}" for t in TABLES} <= set(reachable), reachable


async def service_insert(world: World, statement: str, params: dict[str, Any]) -> int:
    """Run a write as the service does (no RLS), and roll it back; its row count."""
    async with (
        await psycopg.AsyncConnection.connect(world.database_url, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        return (await conn.execute(statement, params)).rowcount


@pytest.mark.parametrize("parent", ["own", "other_users"])
async def test_a_message_hangs_only_under_a_message_of_its_own_chat(
    world: World, parent: str
) -> None:
    # GIVEN a message stored in the owner's chat (by the service: the Data API roles write no
    # messages), under a parent message
    parent_id = world.owner.reply_id if parent == "own" else world.other_user.reply_id
    statement = """
    insert into public.message (chat_id, role, content, parent_message_id)
    values (%(chat)s, 'user', 'a reply', %(parent)s)
    """
    params = {"chat": world.owner.chat_id, "parent": parent_id}
    # WHEN it is the owner's own message, it is stored; another user's is refused, just as a
    # message id that does not exist would be, so the refusal tells nothing about it
    if parent == "own":
        assert await service_insert(world, statement, params) == 1
    else:
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            await service_insert(world, statement, params)
        missing = {**params, "parent": uuid.uuid4()}
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            await service_insert(world, statement, missing)


@pytest.mark.parametrize("actor", ACTORS)
async def test_no_one_writes_a_message_through_the_data_api(world: World, actor: Actor) -> None:
    # A member could otherwise rewrite another member's message, or plant one in their name.
    statement = "update public.message set content = 'changed' where sender_id = %(sender)s"
    outcome = await attempt(world, actor, statement, {"sender": world.member})
    assert outcome.refused is not None, outcome
    assert not outcome.changed, outcome


DELETE_MESSAGE_SQL = "delete from public.message where id = %(id)s"


@pytest.mark.parametrize("actor", ["member", "former_member", "other_user"])
async def test_only_its_sender_and_the_owner_delete_a_message(world: World, actor: Actor) -> None:
    # GIVEN the owner's message and the member's, in the owner's chat
    [row] = await fetch(
        world.database_url, "select id from public.message where sender_id = %s", world.member
    )
    member_message = row["id"]
    # WHEN the actor deletes the owner's message, THEN nothing goes
    outcome = await attempt(world, actor, DELETE_MESSAGE_SQL, {"id": world.owner.user_message_id})
    assert (outcome.rowcount, outcome.changed) == (0, False), outcome
    # AND the owner deletes the member's
    outcome = await attempt(world, "owner", DELETE_MESSAGE_SQL, {"id": member_message})
    assert (outcome.rowcount, outcome.changed) == (1, True), outcome


# Realtime's read check for a private channel: it inserts a probe row for the topic as itself,
# then selects it as the user, `realtime.topic()` set to the topic (Realtime.Tenants.Authorization).
PROBE_SQL = """
insert into realtime.messages (id, topic, extension, private) values (%s, %s, 'broadcast', true)
"""
SET_TOPIC_SQL = "select set_config('realtime.topic', %s, true)"
READ_PROBE_SQL = "select id from realtime.messages where id = %s"
SEND_SQL = """
insert into realtime.messages (topic, extension, payload, event, private)
values (%s, 'broadcast', '{}', 'draft', true)
"""


@pytest.mark.parametrize("actor", ACTORS)
async def test_only_a_chats_owner_and_members_may_join_its_private_channel(
    world: World, actor: Actor
) -> None:
    role, claims = claims_for(actor, world)
    topic = f"chat:{world.owner.chat_id}"
    probe = uuid.uuid4()
    async with (
        await psycopg.AsyncConnection.connect(world.database_url, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        await conn.execute(PROBE_SQL, (probe, topic))
        await conn.execute(SET_CLAIMS_SQL, (json.dumps(claims),))
        await conn.execute(SET_TOPIC_SQL, (topic,))
        await conn.execute(SET_ROLE_SQL[role])
        rows = await (await conn.execute(READ_PROBE_SQL, (probe,))).fetchall()
    assert len(rows) == (1 if actor in ("owner", "member") else 0)


@pytest.mark.parametrize("actor", ACTORS)
async def test_nobody_may_send_on_a_chats_private_channel(world: World, actor: Actor) -> None:
    # (its broadcasts come from the database: the draft writer's realtime.send)
    role, claims = claims_for(actor, world)
    topic = f"chat:{world.owner.chat_id}"
    async with (
        await psycopg.AsyncConnection.connect(world.database_url, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        await conn.execute(SET_CLAIMS_SQL, (json.dumps(claims),))
        await conn.execute(SET_TOPIC_SQL, (topic,))
        await conn.execute(SET_ROLE_SQL[role])
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(SEND_SQL, (topic,))


BROADCAST_SQL = """
insert into realtime.messages (topic, extension, payload, event, private)
values (%s, 'broadcast', %s, 'draft', true)
"""
READ_BROADCASTS_SQL = "select topic, payload ->> 'text' as text from realtime.messages"


@pytest.mark.parametrize("grants", GRANTS)
async def test_a_session_that_names_its_own_channel_reads_only_that_channels_broadcasts(
    worlds: dict[Grants, World], grants: Grants
) -> None:
    # GIVEN drafts broadcast on both users' private channels
    world = worlds[grants]
    own, others = f"chat:{world.other_user.chat_id}", f"chat:{world.owner.chat_id}"
    role, claims = claims_for("other_user", world)
    async with (
        await psycopg.AsyncConnection.connect(world.database_url, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        await conn.execute(BROADCAST_SQL, (own, json.dumps({"text": "mine"})))
        await conn.execute(BROADCAST_SQL, (others, json.dumps({"text": "the owner's draft"})))
        # WHEN a user sets the topic of their own chat, as Realtime does when they join it, and
        # reads every row
        await conn.execute(SET_CLAIMS_SQL, (json.dumps(claims),))
        await conn.execute(SET_TOPIC_SQL, (own,))
        await conn.execute(SET_ROLE_SQL[role])
        rows = await (await conn.execute(READ_BROADCASTS_SQL)).fetchall()
    # THEN they read their own channel's broadcast and not the other chat's
    assert rows == [(own, "mine")]


SEND_FUNCTION_SQL = "select realtime.send(%s, 'draft', %s, true)"
SERVICE_ROLE_SQL = "set local role service_role"
TOPIC_ROWS_SQL = "select count(*) from realtime.messages where topic = %s"


@pytest.mark.parametrize("grants", GRANTS)
@pytest.mark.parametrize("actor", ACTORS)
async def test_only_the_service_may_call_realtime_send(
    worlds: dict[Grants, World], actor: Actor, grants: Grants
) -> None:
    world = worlds[grants]
    role, claims = claims_for(actor, world)
    topic = f"chat:{world.owner.chat_id}"
    payload = json.dumps({"text": "planted"})
    async with (
        await psycopg.AsyncConnection.connect(world.database_url, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        async with conn.transaction(force_rollback=True):
            await conn.execute(SET_CLAIMS_SQL, (json.dumps(claims),))
            await conn.execute(SET_ROLE_SQL[role])
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(SEND_FUNCTION_SQL, (payload, topic))
        # The service role (the draft writer's, on Supabase) sends.
        await conn.execute(SERVICE_ROLE_SQL)
        await conn.execute(SEND_FUNCTION_SQL, (payload, topic))
        await conn.execute(RESET_ROLE_SQL)
        [(sent,)] = await (await conn.execute(TOPIC_ROWS_SQL, (topic,))).fetchall()
    assert sent == 1


SEED_BRANCH_SQL = "insert into public.branch (chat_id, id) values (%s, 'main'), (%s, 'other')"
# The first choice of a chat inserts its row; a later one updates it.
SWITCH_SQL = """
insert into public.active_branch (chat_id, branch_id) values (%(chat)s, %(branch)s)
on conflict (chat_id, assistant_id) do update set branch_id = excluded.branch_id
"""
SET_JOBS_SQL = "update public.job_runs set status = %s where chat_id = %s"
ACTIVE_BRANCH_SQL = "select branch_id from public.active_branch where chat_id = %s"


@pytest.mark.parametrize("grants", GRANTS)
@pytest.mark.parametrize("chosen_before", [False, True])
@pytest.mark.parametrize("job_status", ["waiting", "queued", "processing", "paused", "completed"])
async def test_the_data_api_switches_branches_only_while_no_turn_runs(
    worlds: dict[Grants, World], job_status: str, chosen_before: bool, grants: Grants
) -> None:
    # GIVEN the owner's chat with two branches, and its turn in `job_status`
    world = worlds[grants]
    chat = world.owner.chat_id
    role, claims = claims_for("owner", world)
    async with (
        await psycopg.AsyncConnection.connect(world.database_url, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        await conn.execute(SEED_BRANCH_SQL, (chat, chat))
        if chosen_before:
            await conn.execute(SWITCH_SQL, {"chat": chat, "branch": "main"})
        await conn.execute(SET_JOBS_SQL, (job_status, chat))
        # WHEN the owner switches to the other branch through the Data API
        refusal = None
        try:
            async with conn.transaction():
                await conn.execute(SET_CLAIMS_SQL, (json.dumps(claims),))
                await conn.execute(SET_ROLE_SQL[role])
                await conn.execute(SWITCH_SQL, {"chat": chat, "branch": "other"})
        except psycopg.errors.InsufficientPrivilege as exc:
            refusal = str(exc)
        await conn.execute(RESET_ROLE_SQL)
        active = [
            row[0] for row in await (await conn.execute(ACTIVE_BRANCH_SQL, (chat,))).fetchall()
        ]
    # THEN it is refused while the turn has not ended, as the API answers 409
    if job_status == "completed":
        assert (refusal, active) == (None, ["other"])
    else:
        assert refusal is not None
        assert "row-level security" in refusal  # by the policy, not for want of a privilege
        assert active == (["main"] if chosen_before else [])
