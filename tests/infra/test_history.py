"""`history.history` against the database, without the app: the path from the root to a
branch's head, the active branch by default, every branch on request, the latest draft of a
reply still being written, and nothing of another user's chat. The turns that make these rows
through the API: tests/handlers/test_branches.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from infra.db import Pool
from infra.store import history as history_store
from infra.store.access import Claims
from infra.store.branches import BranchNotFound
from infra.store.chats import ChatNotFound
from infra.store.ids import ChatId
from tests.support import create_user_with_chat, execute

INSERT_SQL = """
insert into public.message (id, chat_id, role, content, status, parent_message_id, metadata,
  created_at)
values (%s, %s, %s, %s, %s, %s, %s, now() - make_interval(secs => %s))
"""
BRANCH_SQL = "insert into public.branch (chat_id, id, forked_from) values (%s, %s, %s)"


class Thread:
    """Two turns on `main`, and the second answered again on a branch of its own: the rows a
    regenerated reply leaves (infra/store/branches.py)."""

    def __init__(self, database_url: str, user_id: uuid.UUID, chat_id: uuid.UUID) -> None:
        self.database_url, self.user_id, self.chat_id = database_url, user_id, chat_id
        self.ids: dict[str, uuid.UUID] = {}

    async def add(
        self,
        name: str,
        role: str,
        *,
        parent: str | None,
        branch: str,
        age_s: int,
        message_id: uuid.UUID | None = None,
    ) -> None:
        self.ids[name] = message_id or uuid.uuid4()
        parent_id = self.ids[parent] if parent else None
        marks = {"branchId": branch}
        await execute(
            self.database_url,
            INSERT_SQL,
            self.ids[name],
            self.chat_id,
            role,
            name,
            "completed",
            parent_id,
            Jsonb(marks),
            age_s,
        )

    async def build(self) -> str:
        """The rows; the regenerated branch's id."""
        await self.add("first question", "user", parent=None, branch="main", age_s=50)
        await self.add(
            "first answer", "assistant", parent="first question", branch="main", age_s=49
        )
        await self.add("second question", "user", parent=None, branch="main", age_s=40)
        await self.add(
            "second answer", "assistant", parent="second question", branch="main", age_s=39
        )
        # The branch is named after its first message, the new reply.
        other = uuid.uuid4()
        await execute(self.database_url, BRANCH_SQL, self.chat_id, "main", None)
        await execute(
            self.database_url, BRANCH_SQL, self.chat_id, str(other), self.ids["second answer"]
        )
        await self.add(
            "another answer",
            "assistant",
            parent="second question",
            branch=str(other),
            age_s=30,
            message_id=other,
        )
        return str(other)

    async def rows(self, pool: Pool, **options: Any) -> tuple[str, list[history_store.HistoryRow]]:
        """The history as this user reads it: the branch shown, and the rows."""
        claims: Claims = {"sub": str(self.user_id), "role": "authenticated"}
        return await history_store.history(
            pool,
            claims,
            chat_id=ChatId(self.chat_id),
            assistant_id="default",
            fallback="default",
            **options,
        )

    async def history(self, pool: Pool, **options: Any) -> tuple[str, list[str]]:
        shown, rows = await self.rows(pool, **options)
        return shown, [row.content for row in rows]


MAIN = ["first question", "first answer", "second question", "second answer"]
REGENERATED = ["first question", "first answer", "second question", "another answer"]


async def test_the_history_follows_the_active_branch_or_the_one_asked_for(
    database_url: str, pool: Pool
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    thread = Thread(database_url, user_id, chat_id)
    other = await thread.build()
    # With no branch chosen, `main` is active; another branch is there on request.
    assert await thread.history(pool) == ("main", MAIN)
    assert await thread.history(pool, branch=other) == (other, REGENERATED)
    # Every branch: all the messages, oldest first, the active branch named.
    assert await thread.history(pool, every_branch=True) == (
        "main",
        [*MAIN, "another answer"],
    )
    # Once the other branch is active, it is the default.
    await execute(
        database_url,
        "insert into public.active_branch (chat_id, branch_id) values (%s, %s)",
        chat_id,
        other,
    )
    assert await thread.history(pool) == (other, REGENERATED)
    assert await thread.history(pool, branch="main") == ("main", MAIN)
    with pytest.raises(BranchNotFound):
        await thread.history(pool, branch="no-such-branch")


async def test_a_reply_being_written_comes_with_its_latest_draft_of_either_transport(
    database_url: str, pool: Pool
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    thread = Thread(database_url, user_id, chat_id)
    await thread.add("question", "user", parent=None, branch="main", age_s=10)
    await thread.add("", "assistant", parent="question", branch="main", age_s=9)
    reply = thread.ids[""]
    await execute(database_url, "update message set status = 'streaming' where id = %s", reply)
    # GIVEN the reply's draft in both tables (DRAFT_TRANSPORT changed while it streamed)
    for table, text, seq in (("message_draft", "Here", 2), ("broadcast_draft", "Here is", 3)):
        await execute(
            database_url,
            f"insert into public.{table} (message_id, chat_id, draft_content, seq)"  # noqa: S608
            " values (%s, %s, %s, %s)",
            reply,
            chat_id,
            text,
            seq,
        )
    # THEN the history carries the later one
    _, rows = await thread.rows(pool)
    assert [(r.draft_content, r.draft_seq) for r in rows] == [(None, None), ("Here is", 3)]
    # AND once the reply ended, none: its content is the answer
    await execute(database_url, "update message set status = 'completed' where id = %s", reply)
    _, rows = await thread.rows(pool)
    assert [r.draft_content for r in rows] == [None, None]


async def test_another_users_chat_has_no_history_for_them(database_url: str, pool: Pool) -> None:
    owner, chat_id = await create_user_with_chat(database_url)
    await Thread(database_url, owner, chat_id).build()
    stranger, _ = await create_user_with_chat(database_url)
    with pytest.raises(ChatNotFound):
        await Thread(database_url, stranger, chat_id).history(pool, every_branch=True)
