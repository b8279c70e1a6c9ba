"""A thread's branches: which checkpoint each message belongs to, the branches forks make, and
the active branch (what a fork starts from is infra/store/forks.py's; the history along a
branch, infra/store/history.py's).

Every turn records on its user message the checkpoint it started from (`metadata.checkpointId`,
null for a thread's first turn; a further addressee's turn leaves the message to the first's)
and on its reply the checkpoint it ended at and the one it started from (`baseCheckpointId`),
all with the branch they are on (`metadata.branchId`, `main` until a fork). Two things fork the
thread: an edit of a user message, and a regenerated reply. Either runs a new turn from the
checkpoint the replaced turn began from; LangGraph stores the new checkpoints beside the old
ones, and the new branch (named after its first message: the edited message's replacement, or
the new reply) is recorded in `public.branch` with the message it replaces (`forked_from`) and
its head, the newest checkpoint a turn on it stored.

A branch's messages, from the root to its head, are its own and, before the message it replaces,
those of the branch that message is on, and so on up to `main`. One branch per chat and
assistant is active (`public.active_branch`; none stored: `main`): a fork makes its branch active,
the user may activate another, and a message continues the active one from its head. Messages
off the active branch carry `metadata.stale`, kept up to date whenever the active branch
changes, so Realtime subscribers see a switch as updates of the rows it hides or shows. Nothing
is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import errors
from psycopg.types.json import Jsonb

from infra.db import Conn, Pool, fetch_rows
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.chats import require_chat
from infra.store.forks import Edit
from infra.store.ids import ChatId, MessageId
from infra.store.jobs import JobAlreadyActive
from infra.store.messages import MessageMetadata
from infra.store.statuses import UNFINISHED_STATUSES, with_statuses

MAIN_BRANCH = "main"

ACTIVE_SQL = """
select coalesce(
  (select branch_id from public.active_branch
   where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s),
  'main') as branch,
  (select b.head_checkpoint_id from public.branch b
   where b.chat_id = %(chat_id)s and b.assistant_id = %(assistant_id)s
     and b.id = coalesce(
       (select branch_id from public.active_branch
        where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s),
       'main')) as head
"""
# The branch's messages from the root to its head, as `on_path`: its own, then, going up, those
# of the branch each fork replaced a message of that come before the replaced message (a user
# message sorts before its reply, which is stored in the same transaction).
PATH_SQL = """
with recursive chain (branch_id, cut_at, cut_rank, depth) as (
  select %(branch)s::text, 'infinity'::timestamptz, 0, 0
  union all
  select coalesce(f.metadata ->> 'branchId', 'main'), f.created_at, (f.role <> 'user')::int,
    c.depth + 1
  from chain c
  join public.branch b
    on b.chat_id = %(chat_id)s and b.assistant_id = %(assistant_id)s and b.id = c.branch_id
  join public.message f on f.id = b.forked_from
  where c.depth < 10000
), on_path as (
  select m.id from public.message m
  join chain c on c.branch_id = coalesce(m.metadata ->> 'branchId', 'main')
  where m.chat_id = %(chat_id)s and m.assistant_id = %(assistant_id)s
    and (m.created_at, (m.role <> 'user')::int) < (c.cut_at, c.cut_rank)
)
"""
# `metadata.stale` is set exactly on the messages off the active branch (`%(branch)s`).
RESTALE_SQL = (
    PATH_SQL  # noqa: S608 (constants only)
    + """
update public.message m
set metadata = case when m.id in (select id from on_path) then m.metadata - 'stale'
                    else m.metadata || '{"stale": true}'::jsonb end,
    updated_at = now()
where m.chat_id = %(chat_id)s and m.assistant_id = %(assistant_id)s
  and (m.id in (select id from on_path)) = coalesce((m.metadata ->> 'stale')::boolean, false)
"""
)
# Each message `marks` names (its id: what to add to its metadata).
MARK_SQL = """
update public.message m
set metadata = m.metadata || (%(marks)s::jsonb -> m.id::text), updated_at = now()
where m.id = any(%(ids)s)
"""
# A turn's branch now ends at `head`; a fork's branch is new (a stored one keeps its origin).
RECORD_BRANCH_SQL = """
with recorded as (
  insert into public.branch (chat_id, assistant_id, id, forked_from, head_checkpoint_id)
  values (%(chat_id)s, %(assistant_id)s, %(branch)s, %(forked_from)s, %(head)s)
  on conflict (chat_id, assistant_id, id) do update
  set head_checkpoint_id = excluded.head_checkpoint_id, updated_at = now()
)"""
# The branch, and its messages' marks, in one statement.
RECORD_TURN_SQL = RECORD_BRANCH_SQL + MARK_SQL
SET_ACTIVE_SQL = """
insert into public.active_branch (chat_id, assistant_id, branch_id)
values (%(chat_id)s, %(assistant_id)s, %(branch)s)
on conflict (chat_id, assistant_id) do update
set branch_id = excluded.branch_id, updated_at = now()
"""
# A later round of a turn moves the head of its reply's branch.
ADVANCE_HEAD_SQL = """
update public.branch b set head_checkpoint_id = %(head)s, updated_at = now()
from public.message m
where m.id = %(reply_id)s and b.chat_id = m.chat_id and b.assistant_id = m.assistant_id
  and b.id = coalesce(m.metadata ->> 'branchId', 'main')
"""
BRANCH_EXISTS_SQL = """
select 1 from public.branch
where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s and id = %(branch)s
"""
# A branch's latest message is its newest own one (a reply sorts after its user message).
BRANCHES_SQL = """
select b.id, b.forked_from, b.created_at, b.id = %(active)s as active,
  l.id as latest_id, l.role as latest_role, l.content as latest_content,
  l.status as latest_status, l.created_at as latest_created_at
from public.branch b
left join lateral (
  select m.id, m.role, m.content, m.status, m.created_at from public.message m
  where m.chat_id = b.chat_id and m.assistant_id = b.assistant_id
    and coalesce(m.metadata ->> 'branchId', 'main') = b.id
  order by m.created_at desc, m.role
  limit 1
) l on true
where b.chat_id = %(chat_id)s and b.assistant_id = %(assistant_id)s
order by b.created_at, b.id
"""
# Under the user's RLS, which lets them read their chat's jobs: a turn has not ended. The
# policy "no switch while a turn runs" (migration 0017) asks the same of every write through
# the Data API; a quick path that died counts until the next message or the outbox relay's
# sweep ends it, as the database cannot know TURN_LEASE_S.
JOB_ACTIVE_SQL = with_statuses(
    """
select 1 from public.job_runs
where chat_id = %(chat_id)s and assistant_id = %(assistant_id)s and status in ({unfinished})
limit 1
""",
    unfinished=UNFINISHED_STATUSES,
)


class BranchNotFound(LookupError):
    """No such branch in the user's chat."""


async def record_turn(
    conn: Conn,
    *,
    chat_id: ChatId,
    assistant_id: str,
    message_id: MessageId,
    reply_id: MessageId,
    branch: str,
    base_checkpoint_id: str | None,
    head: str | None,
    edit: Edit | None,
    marks_message: bool = True,
    restale: bool = False,
) -> None:
    """Record where the turn of `message_id` began, on which branch, and that branch's new
    head, in the transaction that stores the turn's checkpoints. A fork's branch is new and
    becomes the active one. The reply is marked with its branch here, before the active
    branch's stale marks are set again; its caller adds its head checkpoint. Not
    `marks_message`: the message is another assistant's turn's (a message to several), which
    keeps its marks. `restale`: the turn moved its message onto the active branch (a cascade's
    regenerated dependent continuing the branch its cascade made)."""
    where = {"chat_id": chat_id, "assistant_id": assistant_id, "branch": branch}
    marks: dict[MessageId, MessageMetadata] = {reply_id: {"branchId": branch}}
    if marks_message and (edit is None or not edit.regenerate):
        # A regenerated reply answers a message that stays where it was.
        marks[message_id] = {"checkpointId": base_checkpoint_id, "branchId": branch}
        if edit is not None:
            marks[message_id]["editOf"] = str(edit.message_id)
    forked_from = edit.forked_from if edit else None
    recorded = {**where, "forked_from": forked_from, "head": head}
    await conn.execute(RECORD_TURN_SQL, {**recorded, **_marks(marks)})
    if edit is not None:
        await conn.execute(SET_ACTIVE_SQL, where)
    if edit is not None or restale:
        await conn.execute(RESTALE_SQL, where)


async def advance_head(conn: Conn, reply_id: MessageId, head: str | None) -> None:
    """A later round of the turn of `reply_id` stored checkpoints up to `head`."""
    if head is not None:
        await conn.execute(ADVANCE_HEAD_SQL, {"reply_id": reply_id, "head": head})


async def mark_reply(conn: Conn, message_id: MessageId, marks: MessageMetadata) -> None:
    await conn.execute(MARK_SQL, _marks({message_id: marks}))


def _marks(marks: dict[MessageId, MessageMetadata]) -> dict[str, Any]:
    return {"ids": list(marks), "marks": Jsonb({str(m): v for m, v in marks.items()})}


@dataclass(frozen=True)
class BranchRow:
    """A branch, with its latest message (the `latest_` columns, null when it has none)."""

    id: str
    forked_from: MessageId | None
    created_at: datetime
    active: bool
    latest_id: MessageId | None
    latest_role: str | None
    latest_content: str | None
    latest_status: str | None
    latest_created_at: datetime | None


async def list_branches(
    pool: Pool, claims: Claims, *, chat_id: ChatId, assistant_id: str
) -> list[BranchRow]:
    """The thread's branches, oldest first, each with its latest message."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        params: dict[str, object] = {"chat_id": chat_id, "assistant_id": assistant_id}
        params["active"] = await active_branch(conn, params)
        return await fetch_rows(conn, BranchRow, BRANCHES_SQL, params)


async def activate(
    pool: Pool, claims: Claims, *, chat_id: ChatId, assistant_id: str, branch: str
) -> None:
    """Make `branch` the active one, under the user's RLS. JobAlreadyActive while a turn of the
    chat has not ended (it holds the slot, paused too, or waits for it): its messages land on
    the branch it began on."""
    params = {"chat_id": chat_id, "assistant_id": assistant_id, "branch": branch}
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        await require_branch(conn, params)
        if await (await conn.execute(JOB_ACTIVE_SQL, params)).fetchone() is not None:
            raise JobAlreadyActive(chat_id)
        try:
            await conn.execute(SET_ACTIVE_SQL, params)
        except errors.InsufficientPrivilege as exc:
            if "row-level security" not in str(exc):
                raise
            # The policy saw a turn that began after the check above.
            raise JobAlreadyActive(chat_id) from exc
        # The messages' marks are the service's to write (migration 0022).
        await act_as_service(conn)
        await conn.execute(RESTALE_SQL, params)


async def active_branch(conn: Conn, params: Mapping[str, object]) -> str:
    """The active branch of the chat and assistant in `params` (`main` when none is stored)."""
    row = await (await conn.execute(ACTIVE_SQL, params)).fetchone()
    return str(row["branch"]) if row else MAIN_BRANCH


async def require_branch(conn: Conn, params: Mapping[str, object]) -> None:
    """BranchNotFound unless `params`' branch is one of its chat and assistant's."""
    if await (await conn.execute(BRANCH_EXISTS_SQL, params)).fetchone() is None:
        raise BranchNotFound(params["branch"])
