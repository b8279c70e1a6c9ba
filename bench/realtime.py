"""Realtime fan-out: change events per streaming message, read from a logical replication slot.

Supabase Realtime decodes the WAL and sends every subscriber one event per committed row change
of a table in the `supabase_realtime` publication. A `test_decoding` slot sees the same changes,
each with its commit time, so the bench counts events exactly as Realtime would emit them and
measures how far the committed draft trails the token stream.

The round is the background round's own code path: the graph streamed by `stream_agent_text`
into the product's `DraftWriter` (or a naive writer that updates once per token), with the
scripted model at 20, 100 and 500 tokens/s. The bench notes when each token reached the writer.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import build_agent_graph, state_values, stream_agent_text
from agent.model import ScriptedChatModel
from agent.snapshot import render_agent_snapshot
from agent.threads import thread_config, thread_key
from infra.db import Pool, create_pool
from infra.store import messages
from infra.store.drafts import DraftWriter
from infra.store.ids import ChatId, MessageId
from tests.pg_servers import restartable_postgres
from tests.support import create_user_with_chat, fetch

RATES = (20, 100, 500)
CREATE_SLOT_SQL = "select pg_create_logical_replication_slot(%s, 'test_decoding')"
DROP_SLOT_SQL = "select pg_drop_replication_slot(%s)"
CHANGES_SQL = (
    "select data from pg_logical_slot_get_changes(%s, null, null, 'include-timestamp', '1')"
)
PUBLISHED_SQL = "select schemaname, tablename from pg_publication_tables where pubname = %s"
# The whole draft on every token, as a writer without throttling would store it.
NAIVE_UPSERT_SQL = """
insert into public.message_draft (message_id, chat_id, draft_content, seq, updated_at)
values (%s, %s, %s, %s, now())
on conflict (message_id) do update
set draft_content = excluded.draft_content, seq = excluded.seq, updated_at = excluded.updated_at
"""
_TABLE = re.compile(r"^table (?P<table>[^:]+): (?P<op>INSERT|UPDATE|DELETE):")
_DRAFT = re.compile(r"draft_content\[text\]:'((?:[^']|'')*)'")
_COMMIT_AT = re.compile(r"\(at (?P<at>[^)]+)\)")


class Writer(Protocol):
    async def start(self) -> None: ...
    async def append(self, text: str) -> None: ...
    async def flush(self) -> None: ...


class NaiveWriter:
    """What the draft writer replaces: the whole draft written on every token."""

    def __init__(self, pool: Pool, *, message_id: MessageId, chat_id: ChatId) -> None:
        self._pool, self._message_id, self._chat_id = pool, message_id, chat_id
        self._text, self._seq = "", 0

    async def start(self) -> None:
        return None

    async def append(self, text: str) -> None:
        self._text += text
        self._seq += 1
        async with self._pool.connection() as conn:
            await conn.execute(
                NAIVE_UPSERT_SQL, (self._message_id, self._chat_id, self._text, self._seq)
            )

    async def flush(self) -> None:
        return None


@dataclass(frozen=True)
class Change:
    table: str
    committed: float  # unix seconds
    draft: str | None  # draft_content of a message_draft write


@dataclass(frozen=True)
class FanOut:
    writer: str
    rate: int
    tokens: int
    seconds: float  # first token to last commit
    events: int
    max_in_1s: int
    lags: list[float]
    final_equal: bool

    @property
    def per_s(self) -> float:
        return self.events / self.seconds if self.seconds else float("nan")

    @property
    def achieved_rate(self) -> float:
        return self.tokens / self.seconds if self.seconds else float("nan")


@asynccontextmanager
async def logical_server(server_url: str) -> AsyncIterator[tuple[str, str]]:
    """`server_url` when it decodes logically, else a server of our own that does."""
    [row] = await fetch(server_url, "show wal_level")
    if row["wal_level"] == "logical":
        yield server_url, "given server (wal_level=logical)"
        return
    async with restartable_postgres("wal_level = logical\n") as own:
        yield own.url(), f"own server (given one has wal_level={row['wal_level']})"


def parse_changes(lines: Sequence[str], tables: set[str]) -> list[Change]:
    changes: list[Change] = []
    pending: list[tuple[str, str | None]] = []
    for line in lines:
        if line.startswith("BEGIN"):
            pending = []
        elif (table := _TABLE.match(line)) is not None:
            if table["table"] in tables:
                draft = _DRAFT.search(line)
                pending.append((table["table"], draft[1].replace("''", "'") if draft else None))
        elif line.startswith("COMMIT") and (at := _COMMIT_AT.search(line)) is not None:
            committed = _timestamp(at["at"])
            changes.extend(Change(t, committed, d) for t, d in pending)
            pending = []
    return changes


def _timestamp(text: str) -> float:
    # test_decoding prints `2026-11-22 14:00:00.123456+00`; fromisoformat wants `+00:00`.
    if re.search(r"[+-]\d\d$", text):
        text += ":00"
    return datetime.fromisoformat(text).timestamp()


async def stream_round(
    pool: Pool, writer: Writer, rate: int, words: int
) -> tuple[list[tuple[float, int]], str]:
    """Stream one reply of about `words` tokens at `rate` tokens/s into `writer`; returns when
    each token reached the writer (unix time, draft length so far) and the final content."""
    model = ScriptedChatModel(token_delay_ms=1000 / rate)
    graph = build_agent_graph(model, [], InMemorySaver())
    config = thread_config(thread_key(uuid.uuid4(), "default"))
    prompt = " ".join(f"w{i}" for i in range(words))
    emitted: list[tuple[float, int]] = []
    length = 0
    await writer.start()
    async for text in stream_agent_text(graph, {"messages": [HumanMessage(prompt)]}, config):
        length += len(text)
        emitted.append((time.time(), length))
        await writer.append(text)
    await writer.flush()
    final = render_agent_snapshot(state_values(await graph.aget_state(config))).text
    return emitted, final


async def _one(database_url: str, pool: Pool, kind: str, rate: int, seconds: float) -> FanOut:
    _, chat_uuid = await create_user_with_chat(database_url)
    chat_id, message_id = ChatId(chat_uuid), MessageId(uuid.uuid4())
    async with pool.connection() as conn:
        await messages.insert_reply(
            conn, reply_id=message_id, chat_id=chat_id, assistant_id="default", content="",
            status="queued", parent_id=message_id, metadata={},
        )  # fmt: skip
    writer: Writer = (
        DraftWriter(pool, reply_id=message_id, chat_id=chat_id)
        if kind == "draft"
        else NaiveWriter(pool, message_id=message_id, chat_id=chat_id)
    )
    slot = f"bench_{uuid.uuid4().hex[:12]}"
    await fetch(database_url, CREATE_SLOT_SQL, slot)
    try:
        emitted, final = await stream_round(pool, writer, rate, max(3, int(rate * seconds)))
        rows = await fetch(database_url, CHANGES_SQL, slot)
    finally:
        await fetch(database_url, DROP_SLOT_SQL, slot)
    published = await fetch(database_url, PUBLISHED_SQL, "supabase_realtime")
    tables = {f"{r['schemaname']}.{r['tablename']}" for r in published}
    changes = parse_changes([r["data"] for r in rows], tables)
    return _figures(kind, rate, emitted, final, changes)


def _figures(
    kind: str, rate: int, emitted: list[tuple[float, int]], final: str, changes: list[Change]
) -> FanOut:
    commits = [c.committed for c in changes]
    drafts = [c for c in changes if c.draft is not None]
    lags = []
    for at, length in emitted:
        shown = next((c.committed for c in drafts if len(c.draft or "") >= length), None)
        if shown is not None:
            lags.append(max(0.0, shown - at))
    window = (max(commits) - emitted[0][0]) if commits and emitted else 0.0
    return FanOut(
        writer=kind,
        rate=rate,
        tokens=len(emitted),
        seconds=window,
        events=len(changes),
        max_in_1s=max((sum(1 for c in commits if t <= c < t + 1) for t in commits), default=0),
        lags=lags,
        final_equal=bool(drafts) and drafts[-1].draft == final,
    )


async def measure(database_url: str, *, seconds: float) -> list[FanOut]:
    """Both writers at every rate, each on its own message, one after the other."""
    pool = create_pool(database_url, max_size=4)
    await pool.open()
    try:
        return [
            await _one(database_url, pool, kind, rate, seconds)
            for rate in RATES
            for kind in ("draft", "naive")
        ]
    finally:
        await pool.close()
