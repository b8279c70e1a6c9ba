"""A thread's history along a branch, as the history route and the page read it: the read
model over the branches of infra/store/branches.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from infra.db import Pool, fetch_rows
from infra.store.access import Claims, user_transaction
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
select m.id, m.role, m.content, m.status, m.parent_message_id, m.metadata, m.created_at,
  d.draft_content, d.seq as draft_seq
from public.message m
left join lateral {latest_draft} d on m.status in ({live})
where m.chat_id = %(chat_id)s and m.assistant_id = %(assistant_id)s
"""),
    live=LIVE_REPLY_STATUSES,
)
HISTORY_ORDER = "order by m.created_at, m.role desc"
HISTORY_SQL = HISTORY_COLUMNS + HISTORY_ORDER
BRANCH_HISTORY_SQL = (
    PATH_SQL + HISTORY_COLUMNS + "and m.id in (select id from on_path)\n" + HISTORY_ORDER  # noqa: S608
)


@dataclass(frozen=True)
class HistoryRow:
    """A message of the history, with the latest draft of a reply still running."""

    id: MessageId
    role: str
    content: str
    status: str
    parent_message_id: MessageId | None
    # As this code writes it; a user may write their own messages' metadata too (RLS lets them),
    # which the history route's response model checks.
    metadata: MessageMetadata
    created_at: datetime
    draft_content: str | None
    draft_seq: int | None


async def history(
    pool: Pool,
    claims: Claims,
    *,
    chat_id: ChatId,
    assistant_id: str,
    branch: str | None = None,
    every_branch: bool = False,
) -> tuple[str, list[HistoryRow]]:
    """The messages from the root to the head of `branch` (default: the active one), oldest
    first, or with `every_branch`, all of the thread's; and the branch shown (the active one
    when all are)."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        params: dict[str, object] = {"chat_id": chat_id, "assistant_id": assistant_id}
        active = await active_branch(conn, params)
        if every_branch:
            return active, await fetch_rows(conn, HistoryRow, HISTORY_SQL, params)
        shown = branch or active
        params["branch"] = shown
        if branch is not None and branch != active:
            await require_branch(conn, params)
        return shown, await fetch_rows(conn, HistoryRow, BRANCH_HISTORY_SQL, params)
