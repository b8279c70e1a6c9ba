"""A reply's draft rows, whichever transport wrote them (`message_draft` for Postgres Changes,
the unlogged `broadcast_draft` for Broadcast; infra/store/drafts.py writes them): the latest of
them, for what reads a draft, and their deletion when the reply ends."""

from __future__ import annotations

from infra.db import Conn
from infra.store.ids import MessageId

# What reads a reply's draft reads both tables and takes the higher seq (a deployment that changed
# DRAFT_TRANSPORT while a reply streamed has both): the history (infra/store/branches.py), a
# cancel, a failure and a quick path that died (messages.py), each through
# `with_latest_draft`. A reply that ended has its final content: its draft goes, from both.
LATEST_DRAFT_SQL = """(
  select draft_content, seq from public.message_draft where message_id = m.id
  union all
  select draft_content, seq from public.broadcast_draft where message_id = m.id
  order by seq desc limit 1
)"""


def with_latest_draft(template: str) -> str:
    """`template` with `{latest_draft}` replaced by the subquery of the latest draft (its
    `draft_content` and `seq`, or no row) of the reply the statement calls `m`."""
    return template.replace("{latest_draft}", LATEST_DRAFT_SQL)


DELETE_DRAFT_SQL = """
with table_draft as (delete from public.message_draft where message_id = %(message_id)s)
delete from public.broadcast_draft where message_id = %(message_id)s
"""


async def delete_draft(conn: Conn, reply_id: MessageId) -> None:
    await conn.execute(DELETE_DRAFT_SQL, {"message_id": reply_id})
