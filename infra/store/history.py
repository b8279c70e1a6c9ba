"""A chat's history, as the history route and the page read it: one assistant's thread along a
branch, or the whole chat (each assistant's active branch, merged); the read model over the
branches of infra/store/branches.py, which are per assistant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from infra.db import Conn, Pool, fetch_rows
from infra.store.access import Claims, user_transaction
from infra.store.assistants import chat_assistants
from infra.store.branches import PATH_SQL, active_branch, require_branch
from infra.store.chats import require_chat
from infra.store.draft_rows import with_latest_draft
from infra.store.ids import ChatId, MessageId
from infra.store.messages import MessageMetadata
from infra.store.statuses import LIVE_REPLY_STATUSES, with_statuses

# A reply still in the background comes with its latest draft (a page loaded mid-round shows
# it rather than the quick path's text); an ended one with none.
# (either transport's draft: see infra/store/drafts.py)
HISTORY_COLUMNS = with_statuses(
    with_latest_draft("""
select m.id, m.assistant_id, m.role, m.content, m.status, m.parent_message_id, m.metadata,
  m.created_at, d.draft_content, d.seq as draft_seq, m.sender_id
from public.message m
left join lateral {latest_draft} d on m.status in ({live})
where m.chat_id = %(chat_id)s
"""),
    live=LIVE_REPLY_STATUSES,
)
IN_THREAD = "and m.assistant_id = %(assistant_id)s\n"
# Chat order; a user message sorts before its replies, stored in the same transaction, and
# those replies (a message to several assistants) in the order it addressed them.
HISTORY_ORDER = """
order by m.created_at, m.role desc, (
  select array_position(
    array(select jsonb_array_elements_text(p.metadata -> 'addressedTo')), m.assistant_id)
  from public.message p where p.id = m.parent_message_id), m.id
"""
CHAT_SQL = HISTORY_COLUMNS + HISTORY_ORDER
THREAD_SQL = HISTORY_COLUMNS + IN_THREAD + HISTORY_ORDER
BRANCH_HISTORY_SQL = (
    PATH_SQL  # noqa: S608 (constants only)
    + HISTORY_COLUMNS
    + IN_THREAD
    + "and m.id in (select id from on_path)\n"
    + HISTORY_ORDER
)
ON_PATH_SQL = PATH_SQL + "select id from on_path"  # noqa: S608 (constants only)
LISTED_SQL = HISTORY_COLUMNS + "and m.id = any(%(ids)s)\n" + HISTORY_ORDER
# Every assistant that wrote or was written to in the chat, one removed from it too: its
# replies stay in the chat.
THREADS_SQL = "select distinct assistant_id from public.message where chat_id = %(chat_id)s"


@dataclass(frozen=True)
class HistoryRow:
    """A message of the history, with the latest draft of a reply still running."""

    id: MessageId
    # A reply's author; a user message's addressee, as stored.
    assistant_id: str
    role: str
    content: str
    status: str
    parent_message_id: MessageId | None
    # As this code writes it; rows from before migration 0022 may hold what a user wrote through
    # the Data API, which the history route's response model checks.
    metadata: MessageMetadata
    created_at: datetime
    draft_content: str | None
    draft_seq: int | None
    # Who sent a user message (in a shared chat, the owner or a member); None for a reply.
    sender_id: UUID | None = None


@dataclass(frozen=True)
class _Thread:
    assistant_id: str


@dataclass(frozen=True)
class _OnPath:
    id: MessageId


async def history(
    pool: Pool,
    claims: Claims,
    *,
    chat_id: ChatId,
    assistant_id: str | None,
    fallback: str,
    branch: str | None = None,
    every_branch: bool = False,
) -> tuple[str, list[HistoryRow]]:
    """The messages from the root to the head of `branch` (default: the active one) of
    `assistant_id`'s thread, oldest first, or with `every_branch`, all of the thread's; and the
    branch shown (the active one when all are). Without `assistant_id`, the whole chat: each
    assistant's active branch (`every_branch`: every message), merged in chat order, and the
    active branch of the chat's default assistant (`fallback`, the deployment's, for a chat
    with none written down); a `branch` is then the default assistant's."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        if assistant_id is not None or branch is not None:
            thread = assistant_id or await _chat_default(conn, chat_id, fallback)
            return await _thread_history(conn, chat_id, thread, branch, every_branch)
        shown = await active_branch(
            conn, {"chat_id": chat_id, "assistant_id": await _chat_default(conn, chat_id, fallback)}
        )
        if every_branch:
            return shown, await fetch_rows(conn, HistoryRow, CHAT_SQL, {"chat_id": chat_id})
        return shown, await _active_branches(conn, chat_id)


async def _thread_history(
    conn: Conn, chat_id: ChatId, assistant_id: str, branch: str | None, every_branch: bool
) -> tuple[str, list[HistoryRow]]:
    params: dict[str, object] = {"chat_id": chat_id, "assistant_id": assistant_id}
    active = await active_branch(conn, params)
    if every_branch:
        return active, await fetch_rows(conn, HistoryRow, THREAD_SQL, params)
    shown = branch or active
    params["branch"] = shown
    if branch is not None and branch != active:
        await require_branch(conn, params)
    return shown, await fetch_rows(conn, HistoryRow, BRANCH_HISTORY_SQL, params)


async def _active_branches(conn: Conn, chat_id: ChatId) -> list[HistoryRow]:
    """Each of the chat's threads along its active branch, merged in chat order."""
    ids: set[MessageId] = set()
    for thread in await fetch_rows(conn, _Thread, THREADS_SQL, {"chat_id": chat_id}):
        params: dict[str, object] = {"chat_id": chat_id, "assistant_id": thread.assistant_id}
        params["branch"] = await active_branch(conn, params)
        ids.update(row.id for row in await fetch_rows(conn, _OnPath, ON_PATH_SQL, params))
    return await fetch_rows(conn, HistoryRow, LISTED_SQL, {"chat_id": chat_id, "ids": list(ids)})


async def _chat_default(conn: Conn, chat_id: ChatId, fallback: str) -> str:
    listed = await chat_assistants(conn, chat_id, fallback)
    return next(a.assistant_id for a in listed if a.is_default)
