"""The database's copies of the status sets agree with infra/store/statuses.py, where each set is
written once: a migration that changes one without the other fails here."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from infra.store.jobs import JobKind
from infra.store.statuses import (
    JOB_ENDED_STATUSES,
    JOB_STATUSES,
    LIVE_REPLY_STATUSES,
    MESSAGE_STATUSES,
    SLOT_STATUSES,
    UNFINISHED_STATUSES,
)
from tests.support import fetch

CONSTRAINT_SQL = "select pg_get_constraintdef(oid) as sql from pg_constraint where conname = %s"
INDEX_PREDICATE_SQL = """
select pg_get_expr(indpred, indrelid) as sql from pg_index where indexrelid = %s::regclass
"""
TRIGGER_SQL = """
select pg_get_triggerdef(oid) as sql from pg_trigger where tgname = 'job_runs_promote_waiting'
"""
FUNCTION_SQL = "select pg_get_functiondef(%s::regprocedure) as sql"
POLICIES_SQL = """
select policyname, qual, with_check from pg_policies
where schemaname = 'public' and tablename = 'active_branch' and permissive = 'RESTRICTIVE'
"""
START_TURN_SIGNATURE = """handoff.start_turn(uuid, uuid, text, uuid, text, jsonb, boolean, integer,
integer, text[], integer, integer, integer, bigint, double precision, double precision, text, text,
text, uuid, jsonb, boolean)"""
SETS_SQL = "select handoff.slot_statuses() as slot, handoff.unfinished_statuses() as unfinished"


def quoted(text: str) -> set[str]:
    """The string constants of a definition: `ARRAY['a'::text, 'b'::text]` is {a, b}."""
    return set(re.findall(r"'([a-z_]+)'::text", text))


async def definition(database_url: str, query: str, name: str | None = None) -> str:
    [row] = await fetch(database_url, query, *([name] if name else []))
    return str(row["sql"])


@pytest.mark.parametrize(
    ("constraint", "values"),
    [
        ("job_runs_status_check", JOB_STATUSES),
        ("job_runs_kind_check", get_args(JobKind)),
        ("message_status_check", MESSAGE_STATUSES),
    ],
)
async def test_the_check_constraints_allow_the_vocabularies(
    database_url: str, constraint: str, values: tuple[str, ...]
) -> None:
    assert quoted(await definition(database_url, CONSTRAINT_SQL, constraint)) == set(values)


@pytest.mark.parametrize(
    ("index", "values"),
    [
        # The slot itself: `take_slot`'s `on conflict ... where` must repeat it.
        ("public.job_runs_one_active_idx", SLOT_STATUSES),
        ("public.job_runs_active_chat_idx", UNFINISHED_STATUSES),
        ("public.message_active_idx", LIVE_REPLY_STATUSES),
    ],
)
async def test_the_partial_indexes_hold_the_sets(
    database_url: str, index: str, values: tuple[str, ...]
) -> None:
    assert quoted(await definition(database_url, INDEX_PREDICATE_SQL, index)) == set(values)


async def test_a_job_leaving_the_slot_promotes_the_next(database_url: str) -> None:
    trigger = await definition(database_url, TRIGGER_SQL)
    left, entered = trigger.split(" AND ")
    assert "old.status" in left
    assert quoted(left) == set(SLOT_STATUSES)
    assert "new.status" in entered
    assert quoted(entered) == set(JOB_ENDED_STATUSES)
    body = await definition(database_url, FUNCTION_SQL, "handoff.promote_waiting_turn()")
    assert "handoff.slot_statuses()" in body


async def test_taking_a_slot_repeats_the_slots_index(database_url: str) -> None:
    # `on conflict ... where` names the partial unique index by repeating its predicate.
    signature = "handoff.take_slot(uuid, text, uuid, text, text, text, uuid)"
    body = await definition(database_url, FUNCTION_SQL, signature)
    [listed] = re.findall(
        r"on conflict \(chat_id, assistant_id\) where status in \(([^)]*)\)", body
    )
    assert set(re.findall(r"'([a-z_]+)'", listed)) == set(SLOT_STATUSES)
    start = await definition(database_url, FUNCTION_SQL, START_TURN_SIGNATURE)
    assert "handoff.take_slot(" in start
    assert "handoff.unfinished_statuses()" in start
    assert "handoff.slot_statuses()" in start


async def test_the_databases_set_functions_are_the_python_sets(database_url: str) -> None:
    [row] = await fetch(database_url, SETS_SQL)
    assert (row["slot"], row["unfinished"]) == (list(SLOT_STATUSES), list(UNFINISHED_STATUSES))
    # The Data API's branch switch asks for the same turns as the API's (infra/store/branches.py).
    policies = await fetch(database_url, POLICIES_SQL)
    assert policies
    for policy in policies:
        for expression in (policy["qual"], policy["with_check"]):
            assert expression is None or "handoff.unfinished_statuses()" in expression, policy
