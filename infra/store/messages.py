"""Rows of `message`: the user's messages and the replies, with what their metadata holds."""

from __future__ import annotations

from typing import Literal, TypedDict

from psycopg.types.json import Jsonb

from agent.snapshot import SnapshotMetadata, failed_text
from agent.usage import TurnUsage
from infra.db import Conn, Pool
from infra.store.access import Claims, user_transaction
from infra.store.approvals import Decision, PendingApproval
from infra.store.draft_rows import with_latest_draft
from infra.store.ids import ChatId, MessageId
from infra.store.questions import Answer, PendingQuestion
from infra.store.statuses import (
    LIVE_REPLY_STATUSES,
    with_statuses,
)

# What a reply is inserted as: streaming on its quick path, or queued for the background.
ReplyStatus = Literal["streaming", "queued"]
# How a quick path leaves its reply: handed to the background, or ended.
SettledStatus = Literal["queued", "completed"]


class MessageMetadata(TypedDict, total=False):
    """Every key written to `message.metadata`."""

    model: str | None  # the reply's model
    runId: str  # the quick path's LangGraph run
    # The checkpoint a user message's turn started from (null: the thread's first turn); on a
    # reply, the one it ended at (infra/store/branches.py).
    checkpointId: str | None
    # On a reply, the checkpoint its turn began from in its assistant's thread (null: the
    # thread's first turn): what answering it again forks, for any addressee (forks.py).
    baseCheckpointId: str | None
    branchId: str
    stale: bool  # on a branch an edit left
    snapshot: SnapshotMetadata  # the agent's status and tool progress, for subscribers
    pendingApproval: PendingApproval  # the tool call waiting for the user (approvals.py)
    approvals: dict[str, Decision]  # the user's decisions, by tool call id
    pendingQuestion: PendingQuestion  # the model's question waiting for the user (questions.py)
    answers: dict[str, Answer]  # the user's answers, by question id
    editOf: str  # on a user message that replaced another (an edit)
    # On a message an edit or a regeneration replaced: its successor (infra/store/sources.py).
    replacedBy: str
    # On a reply that depends on an edit whose cascade stopped before regenerating it:
    # `declined` (the editor declined to go on) or `canceled` (turns/cascade.py).
    cascade: str
    # On a user message to several assistants: their ids, in mention order, each answering it
    # with a reply of its own (the message's `assistant_id` is the first).
    addressedTo: list[str]
    steeredInto: str  # on a message sent with `steer`: the running reply that answers it
    usage: TurnUsage  # the turn's token usage, per model call and summed


INSERT_REPLY_SQL = """
insert into public.message
  (id, chat_id, assistant_id, role, content, status, parent_message_id, metadata, handoff_event_id)
values (%s, %s, %s, 'assistant', %s, %s, %s, %s, %s)
"""
# The quick path's end: the reply's text, status and marks (its job's transition, in the same
# transaction, is the fence). `metadata` adds to what the reply was inserted with.
SETTLE_SQL = """
update public.message
set content = %s, status = %s, metadata = metadata || %s, handoff_event_id = %s,
    updated_at = now()
where id = %s and status = 'streaming'
"""
# A quick path that lost its slot: the canceled reply keeps all that its stream showed, which
# may be more than the draft the cancel kept.
SHOWN_SQL = """
update public.message
set content = %s, metadata = metadata || jsonb_build_object('usage', %s::jsonb), updated_at = now()
where id = %s and status = 'canceled'
"""
# The background job's progress (agent status, tool calls) for subscribers, and after a stored
# round the turn's usage so far; an ended message keeps the snapshot it ended with.
RECORD_SNAPSHOT_SQL = with_statuses(
    """
update public.message
set metadata = metadata || jsonb_build_object('snapshot', %s::jsonb)
      || jsonb_strip_nulls(jsonb_build_object('usage', %s::jsonb)),
    updated_at = now()
where id = %s and status in ({live})
""",
    live=LIVE_REPLY_STATUSES,
)
STREAMING_SQL = """
update public.message set status = 'streaming', updated_at = now()
where id = %s and status in ('queued', 'error', 'streaming')
"""
# The reply's checkpoint is the thread's head once the job ends (infra/store/branches.py).
COMPLETE_SQL = """
update public.message
set content = %s, status = 'completed', updated_at = now(),
    metadata = metadata || jsonb_build_object('checkpointId', %s::text, 'usage', %s::jsonb)
where id = %s
"""
# What a reply has shown, the latest draft (either transport's) or else its content, locked
# for the failure's update: a failed reply keeps it (agent.snapshot.failed_text).
LAST_SHOWN_SQL = with_latest_draft("""
select coalesce((select d.draft_content from {latest_draft} d), m.content) as shown
from public.message m
where m.id = %s and m.status <> 'completed'
for update of m
""")
# A reply that ends with tool calls unfinished shows them `stopped`, not running for ever. (No
# braces in it: CANCEL_SQL goes through `with_statuses`' formatting.)
STOPPED_CALLS_SQL = """
case when jsonb_typeof(jsonb_extract_path(m.metadata, 'snapshot', 'progress')) = 'array'
then jsonb_set(m.metadata, array['snapshot', 'progress'], (
  select coalesce(jsonb_agg(case when c ->> 'status' = 'pending'
    then c || jsonb_build_object('status', 'stopped') else c end order by n), '[]'::jsonb)
  from jsonb_array_elements(jsonb_extract_path(m.metadata, 'snapshot', 'progress'))
    with ordinality as e(c, n)))
else m.metadata end"""


def _stopping_calls(template: str) -> str:
    """`template` with `{stopped_calls}` replaced by the metadata of `m` with its unfinished
    calls stopped."""
    return template.replace("{stopped_calls}", STOPPED_CALLS_SQL)


FAIL_SQL = _stopping_calls("""
update public.message m
set content = %s, status = 'error', metadata = {stopped_calls}, updated_at = now()
where m.id = %s
""")
# The message keeps what the user saw: its latest draft, else the text the quick path streamed.
# (either transport's: see infra/store/drafts.py)
CANCEL_SQL = with_statuses(
    with_latest_draft(
        _stopping_calls("""
update public.message m
set content = coalesce((select d.draft_content from {latest_draft} d), m.content),
    status = 'canceled', metadata = {stopped_calls}, updated_at = now()
where m.id = %s and m.status in ({live})
""")
    ),
    live=LIVE_REPLY_STATUSES,
)
# A reply whose quick path died keeps the text its draft had shown, followed by `note`, in
# `error` (its job ended in the same transaction: turns/endings.py).
INTERRUPT_SQL = with_latest_draft(
    _stopping_calls("""
update public.message m
set content = concat_ws(
      E'\n\n', nullif(coalesce((select d.draft_content from {latest_draft} d), m.content), ''),
      %s::text),
    status = 'error', metadata = {stopped_calls}, updated_at = now()
where m.id = any(%s::uuid[]) and m.status = 'streaming'
returning m.id
""")
)

VISIBLE_SQL = "select 1 from public.message where id = %s"


async def insert_reply(
    conn: Conn,
    *,
    reply_id: MessageId,
    chat_id: ChatId,
    assistant_id: str,
    content: str,
    status: ReplyStatus,
    parent_id: MessageId,
    metadata: MessageMetadata,
    handoff_event_id: str | None = None,
) -> None:
    params = (
        reply_id,
        chat_id,
        assistant_id,
        content,
        status,
        parent_id,
        Jsonb(metadata),
        handoff_event_id,
    )
    await conn.execute(INSERT_REPLY_SQL, params)


async def settle(
    conn: Conn,
    message_id: MessageId,
    *,
    content: str,
    status: SettledStatus,
    metadata: MessageMetadata,
    handoff_event_id: str | None,
) -> None:
    await conn.execute(SETTLE_SQL, (content, status, Jsonb(metadata), handoff_event_id, message_id))


async def keep_shown(conn: Conn, message_id: MessageId, content: str, *, usage: TurnUsage) -> None:
    """The canceled reply's text is `content`, all that its quick path streamed, and its usage
    what that stream used."""
    await conn.execute(SHOWN_SQL, (content, Jsonb(usage), message_id))


async def record_snapshot(
    conn: Conn,
    message_id: MessageId,
    snapshot: SnapshotMetadata,
    usage: TurnUsage | None = None,
) -> None:
    """The reply's progress, and its usage unless None (kept as it was)."""
    params = (Jsonb(snapshot), Jsonb(usage) if usage is not None else None, message_id)
    await conn.execute(RECORD_SNAPSHOT_SQL, params)


CONTENT_SQL = "select content from public.message where id = %s"


async def content_of(conn: Conn, message_id: MessageId) -> str:
    """The message's text; empty once it was deleted."""
    row = await (await conn.execute(CONTENT_SQL, (message_id,))).fetchone()
    return str(row["content"]) if row is not None else ""


async def mark_streaming(conn: Conn, message_id: MessageId) -> None:
    await conn.execute(STREAMING_SQL, (message_id,))


async def complete(
    conn: Conn,
    message_id: MessageId,
    *,
    content: str,
    checkpoint_id: str | None,
    usage: TurnUsage,
) -> None:
    await conn.execute(COMPLETE_SQL, (content, checkpoint_id, Jsonb(usage), message_id))


async def fail(
    conn: Conn, message_id: MessageId, user_text: str, shown: str | None = None
) -> str | None:
    """The reply keeps what it showed (`shown`, else its latest draft or its content) and says
    `user_text` after it, unless it completed already; its text as it ended (None: it had
    completed)."""
    row = await (await conn.execute(LAST_SHOWN_SQL, (message_id,))).fetchone()
    if row is None:
        return None
    content = failed_text(row["shown"] if shown is None else shown, user_text)
    await conn.execute(FAIL_SQL, (content, message_id))
    return content


async def cancel(conn: Conn, message_id: MessageId) -> None:
    """The reply ends `canceled` with the text its user saw, unless it ended already."""
    await conn.execute(CANCEL_SQL, (message_id,))


async def interrupt(conn: Conn, message_ids: list[MessageId], note: str) -> list[MessageId]:
    """The replies still streaming keep what they showed and say `note` after it, in `error`;
    those that changed."""
    rows = await (await conn.execute(INTERRUPT_SQL, (note, message_ids))).fetchall()
    return [MessageId(r["id"]) for r in rows]


async def visible(pool: Pool, claims: Claims, message_id: MessageId) -> bool:
    """Whether the user may see the message, under RLS: another user's is as good as none."""
    async with user_transaction(pool, claims) as conn:
        return await (await conn.execute(VISIBLE_SQL, (message_id,))).fetchone() is not None
