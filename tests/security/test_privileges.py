"""What `anon` and `authenticated` may do with every object in the database, against one explicit
list, on a database migrated as the tests' (plain Postgres) and on one migrated as a Supabase
project is, whose default privileges give the API roles everything in `public`.

Row-level security filters rows for SELECT, INSERT, UPDATE and DELETE only: TRUNCATE, REFERENCES,
TRIGGER and MAINTAIN, and EXECUTE on functions, are what the privileges alone allow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import psycopg
import pytest

from tests.databases import fresh_database

Migrated = Literal["plain", "supabase_defaults"]
Role = Literal["anon", "authenticated"]

SELECT_ONLY = frozenset({"SELECT"})
# Every object a role has a privilege on, in a schema it may use: the privileges that count.
# Column privileges count as the table's (has_any_column_privilege).
RELATION_PRIVILEGES_SQL = """
select n.nspname || '.' || c.relname as name, r.role,
  array(
    select p from unnest(case when c.relkind = 'S'
      then array['USAGE', 'SELECT', 'UPDATE']
      else array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']
           || case when current_setting('server_version_num')::int >= 170000
                then array['MAINTAIN'] else '{}' end
      end) p
    where case
      when c.relkind = 'S' then has_sequence_privilege(r.role, c.oid, p)
      when p in ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES')
        then has_any_column_privilege(r.role, c.oid, p)
      else has_table_privilege(r.role, c.oid, p)
    end
  ) as privileges
from pg_class c join pg_namespace n on n.oid = c.relnamespace,
  unnest(array['anon', 'authenticated']) r(role)
where c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
  and n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
  and has_schema_privilege(r.role, n.oid, 'USAGE')
"""
FUNCTION_PRIVILEGES_SQL = """
select n.nspname || '.' || p.proname as name, r.role, array['EXECUTE'] as privileges
from pg_proc p join pg_namespace n on n.oid = p.pronamespace,
  unnest(array['anon', 'authenticated']) r(role)
where n.nspname not in ('pg_catalog', 'information_schema')
  and has_schema_privilege(r.role, n.oid, 'USAGE')
  and has_function_privilege(r.role, p.oid, 'EXECUTE')
"""
SCHEMA_USAGE_SQL = """
select n.nspname as name, r.role, array['USAGE'] as privileges
from pg_namespace n, unnest(array['anon', 'authenticated']) r(role)
where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
  and n.nspname not like 'pg_temp%%' and n.nspname not like 'pg_toast_temp%%'
  and has_schema_privilege(r.role, n.oid, 'USAGE')
"""

# Everything the two roles may do, and nothing else. `handoff` and `langgraph` appear nowhere:
# no USAGE on them, so nothing inside them is reachable (the policy on active_branch calls
# handoff.unfinished_statuses() without it).
EXPECTED: dict[tuple[str, Role], frozenset[str]] = {
    ("public", "anon"): frozenset({"USAGE"}),
    ("public", "authenticated"): frozenset({"USAGE"}),
    ("public.chat", "authenticated"): frozenset({"SELECT", "UPDATE", "DELETE"}),
    # Messages are stored by the service, which checks the sender may send (migration 0022).
    ("public.message", "authenticated"): frozenset({"SELECT", "DELETE"}),
    # Written by the service only, through the owner's membership routes.
    ("public.chat_member", "authenticated"): SELECT_ONLY,
    ("public.message_draft", "authenticated"): SELECT_ONLY,
    ("public.broadcast_draft", "authenticated"): SELECT_ONLY,
    ("public.job_runs", "authenticated"): SELECT_ONLY,
    ("public.reply_usage", "authenticated"): SELECT_ONLY,
    ("public.branch", "authenticated"): SELECT_ONLY,
    ("public.active_branch", "authenticated"): frozenset({"SELECT", "INSERT", "UPDATE"}),
    # Written by the service only: the catalogue by `handoff migrate`, a chat's by its routes.
    ("public.assistant", "authenticated"): SELECT_ONLY,
    ("public.chat_assistant", "authenticated"): SELECT_ONLY,
    # What each reply depends on, and the cascades: written by the service only.
    ("public.reply_source", "authenticated"): SELECT_ONLY,
    ("public.cascade", "authenticated"): SELECT_ONLY,
    # Supabase's, as the first migrations make them where they are absent.
    ("auth", "anon"): frozenset({"USAGE"}),
    ("auth", "authenticated"): frozenset({"USAGE"}),
    ("auth.uid", "anon"): frozenset({"EXECUTE"}),
    ("auth.uid", "authenticated"): frozenset({"EXECUTE"}),
    ("auth.jwt", "anon"): frozenset({"EXECUTE"}),
    ("auth.jwt", "authenticated"): frozenset({"EXECUTE"}),
    ("realtime", "anon"): frozenset({"USAGE"}),
    ("realtime", "authenticated"): frozenset({"USAGE"}),
    ("realtime.topic", "anon"): frozenset({"EXECUTE"}),
    ("realtime.topic", "authenticated"): frozenset({"EXECUTE"}),
    # Guarded by its policies: a chat's owner reads its broadcasts; no one inserts or updates.
    ("realtime.messages", "anon"): frozenset({"SELECT", "INSERT", "UPDATE"}),
    ("realtime.messages", "authenticated"): frozenset({"SELECT", "INSERT", "UPDATE"}),
}


@pytest.fixture(params=["plain", "supabase_defaults"])
async def migrated_url(
    request: pytest.FixtureRequest,
    server_url: str,
    template_name: str,
    supabase_template_name: str,
) -> AsyncIterator[str]:
    template = template_name if request.param == "plain" else supabase_template_name
    async with fresh_database(server_url, template) as url:
        yield url


async def what_the_api_roles_may_do(database_url: str) -> dict[tuple[str, Role], frozenset[str]]:
    found: dict[tuple[str, Role], frozenset[str]] = {}
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for query in (SCHEMA_USAGE_SQL, RELATION_PRIVILEGES_SQL, FUNCTION_PRIVILEGES_SQL):
            for name, role, privileges in await (await conn.execute(query)).fetchall():
                if privileges:
                    found[name, role] = found.get((name, role), frozenset()) | set(privileges)
    return found


async def test_the_api_roles_may_do_what_the_list_says_and_nothing_more(
    migrated_url: str,
) -> None:
    assert await what_the_api_roles_may_do(migrated_url) == EXPECTED


async def test_a_table_made_after_the_migrations_gets_supabases_defaults(
    server_url: str, supabase_template_name: str
) -> None:
    # Not vacuous: in the database migrated as a Supabase project, a new table in `public` is
    # the API roles' to do anything with, as on Supabase; our own tables do not keep that.
    async with fresh_database(server_url, supabase_template_name) as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("create table public.unrelated (id int)")
        found = await what_the_api_roles_may_do(url)
    assert {"TRUNCATE", "INSERT"} <= found["public.unrelated", "anon"]
    assert "TRUNCATE" not in found.get(("public.chat", "authenticated"), frozenset())
