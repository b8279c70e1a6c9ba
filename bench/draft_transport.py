"""Drafts over Postgres Changes (DRAFT_TRANSPORT=table) and over Broadcast (broadcast), side by
side in one run, through the dev server's Realtime endpoint and supabase-py's realtime client.

    python3 -m uv run python -m bench.draft_transport            # about two minutes
    python3 -m uv run python -m bench.draft_transport --quick    # seconds; smaller samples

1. Per streaming message: the product's DraftWriter (the background round's code path, the
   scripted model at 20, 100 and 500 tokens/s) writes a reply's drafts while one supabase-py
   subscriber follows the chat's channel. Draft events and websocket bytes it received; delivery
   lag, from the commit (its timestamp read from a logical slot) to the subscriber's callback;
   the lag from a token reaching the writer to the subscriber having it; WAL bytes written from
   the first draft to the draft's removal (pg_current_wal_lsn), per message and per draft.
2. Delivery work per change with 1, 100 and 1,000 subscribers of one chat (supabase-py realtime
   clients, each on a socket of its own, all in this process with the server): RLS checks and
   their time, frames and bytes sent, and how long from the commit until every subscriber had
   the change.

Uses DATABASE_URL's server if it decodes logically (wal_level=logical), else a Postgres of its
own; every section gets a fresh database.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from realtime import AsyncRealtimeClient

from bench.realtime import logical_server, stream_round
from bench.speed import Report, machine
from bench.stats import Table, ms, p50, p95
from devkit.pgoutput import Decoder, RowChange
from devkit.realtime.hub import Hub, Stats
from devkit.realtime.socket import Session
from infra.db import Pool, create_pool
from infra.store import messages
from infra.store.draft_rows import delete_draft
from infra.store.drafts import DraftTransport, DraftWriter, chat_topic
from infra.store.ids import ChatId, MessageId
from tests.databases import fresh_database, migrated_template, resolve_server_url
from tests.realtime_clients import (
    ALL,
    Inbox,
    anon_key,
    chat_channel,
    options,
    subscribed,
    supabase_client,
)
from tests.support import Stack, create_user_with_chat, fetch, running_stack, token_for

TRANSPORTS: tuple[DraftTransport, ...] = ("table", "broadcast")
SLOT_SQL = "select pg_create_logical_replication_slot(%s, 'pgoutput')"
DROP_SLOT_SQL = "select pg_drop_replication_slot(%s)"
CHANGES_SQL = """
select data from pg_logical_slot_get_binary_changes(%s, null, null, 'proto_version', '1',
  'publication_names', 'supabase_realtime,supabase_realtime_messages_publication')
"""
LSN_SQL = "select pg_current_wal_lsn() - '0/0'::pg_lsn as lsn"
# Section 2: the draft each change extends (a reply well into its answer), and what each adds.
FAN_OUT_DRAFT = "word " * 200
FAN_OUT_STEP = "more " * 20


@dataclass(frozen=True)
class Options:
    quick: bool = False
    rates: tuple[int, ...] = (20, 100, 500)
    seconds: float = 4.0
    subscribers: tuple[int, ...] = (1, 100, 1000)
    changes: int = 5

    @classmethod
    def quick_run(cls) -> Options:
        return cls(True, (100,), 1.0, (1, 10), 2)


@dataclass
class Streamed:
    """One streaming message through one transport."""

    transport: str
    rate: int
    tokens: int
    chars: int
    writes: int
    events: int
    bytes: int
    wal: int
    delivery: list[float]
    shown: list[float]
    final_equal: bool


@dataclass
class FanOut:
    transport: str
    subscribers: int
    changes: int
    stats: Stats
    seconds: list[float] = field(default_factory=list)  # commit to the last subscriber


async def lsn(url: str) -> int:
    [row] = await fetch(url, LSN_SQL)
    return int(row["lsn"])


async def new_reply(url: str, pool: Pool) -> tuple[uuid.UUID, ChatId, MessageId]:
    user_id, chat_uuid = await create_user_with_chat(url)
    chat_id, message_id = ChatId(chat_uuid), MessageId(uuid.uuid4())
    async with pool.connection() as conn:
        await messages.insert_reply(
            conn, reply_id=message_id, chat_id=chat_id, assistant_id="default", content="",
            status="queued", parent_id=message_id, metadata={},
        )  # fmt: skip
    return user_id, chat_id, message_id


@asynccontextmanager
async def decoding(url: str) -> AsyncIterator[list[RowChange]]:
    """A pgoutput slot of the bench's own; on exit, the changes committed meanwhile."""
    slot = f"bench_{uuid.uuid4().hex[:12]}"
    await fetch(url, SLOT_SQL, slot)
    changes: list[RowChange] = []
    try:
        yield changes
        rows = await fetch(url, CHANGES_SQL, slot)
        decoded = Decoder().decode(bytes(r["data"]) for r in rows)
        changes.extend(c for c in decoded if isinstance(c, RowChange))
    finally:
        await fetch(url, DROP_SLOT_SQL, slot)


def draft_commits(changes: list[RowChange]) -> dict[int, float]:
    """When each draft (by seq) committed, either transport's."""
    out: dict[int, float] = {}
    for change in changes:
        if change.kind == "DELETE":
            continue
        if change.table == ("public", "message_draft"):
            out[int(change.new["seq"])] = change.commit_timestamp.timestamp()
        elif change.table[0] == "realtime" and change.new.get("event") == "draft":
            out[int(change.new["payload"]["seq"])] = change.commit_timestamp.timestamp()
    return out


def received_drafts(inbox: Inbox, transport: str) -> list[tuple[float, int, str]]:
    """(received at, seq, the draft shown after it), following each transport's rules."""
    out: list[tuple[float, int, str]] = []
    shown = ""
    if transport == "table":
        for at, payload in inbox.timed("message_draft"):
            record = payload["data"]["record"]
            out.append((at, int(record["seq"]), record["draft_content"]))
        return out
    last = 0
    for at, broadcast in inbox.timed("draft"):
        draft = broadcast["payload"]
        if draft["after"] is None:
            shown = draft["text"]
        elif draft["after"] == last:
            shown += draft["text"]
        last = int(draft["seq"])
        out.append((at, last, shown))
    return out


def session_of(hub: Hub, before: set[Session]) -> Session:
    [session] = hub.sessions - before
    return session


async def stream_message(
    stack: Stack, url: str, pool: Pool, transport: DraftTransport, rate: int, seconds: float
) -> Streamed:
    user_id, chat_id, message_id = await new_reply(url, pool)
    inbox = Inbox()
    hub: Hub | None = getattr(stack.app.state, "realtime_hub", None)
    before = set(hub.sessions) if hub else set()
    async with supabase_client(stack.origin, token_for(user_id)) as client:
        channel = chat_channel(client, chat_id, inbox, drafts=transport == "table")
        await subscribed(channel)
        hub = stack.app.state.realtime_hub
        assert hub is not None
        session = session_of(hub, before)
        sent_before, wal_before = session.bytes_sent, await lsn(url)
        writer = DraftWriter(pool, reply_id=message_id, chat_id=chat_id, transport=transport)
        async with decoding(url) as changes:
            emitted, final = await stream_round(pool, writer, rate, max(3, int(rate * seconds)))

            def last_one(items: list[tuple[str, Any]]) -> bool:
                got = received_drafts(inbox, transport)
                return bool(got) and got[-1][1] == writer.writes

            # (before the draft goes: a row gone by the time its change is checked against RLS
            # is not sent, by Realtime either)
            await inbox.until(last_one, wait_s=30)
            async with pool.connection() as conn:
                await delete_draft(conn, message_id)
            wal = await lsn(url) - wal_before
        sent = session.bytes_sent - sent_before
    commits = draft_commits(changes)
    got = received_drafts(inbox, transport)
    shown_lags = []
    for at, length in emitted:
        seen = next((t for t, _, text in got if len(text) >= length), None)
        if seen is not None:
            shown_lags.append(max(0.0, seen - at))
    return Streamed(
        transport=transport, rate=rate, tokens=len(emitted), chars=len(final),
        writes=writer.writes, events=len(got), bytes=sent, wal=wal,
        delivery=[at - commits[seq] for at, seq, _ in got if seq in commits],
        shown=shown_lags, final_equal=bool(got) and got[-1][2] == final,
    )  # fmt: skip


async def streaming_section(url: str, o: Options) -> list[Streamed]:
    pool = create_pool(url, max_size=4)
    await pool.open()
    try:
        rows = []
        for transport in TRANSPORTS:
            async with running_stack(url, draft_transport=transport) as stack:
                for rate in o.rates:
                    rows.append(await stream_message(stack, url, pool, transport, rate, o.seconds))
        return rows
    finally:
        await pool.close()


async def fan_out(url: str, transport: DraftTransport, o: Options) -> list[FanOut]:
    """One chat, more and more subscribers; each change one draft write."""
    pool = create_pool(url, max_size=2)
    await pool.open()
    received: defaultdict[int, list[float]] = defaultdict(list)

    def on_table(payload: Any) -> None:
        received[int(payload["data"]["record"]["seq"])].append(time.time())

    def on_broadcast(payload: Any) -> None:
        received[int(payload["payload"]["seq"])].append(time.time())

    clients: list[AsyncRealtimeClient] = []
    rows = []
    try:
        user_id, chat_id, message_id = await new_reply(url, pool)
        token = token_for(user_id, exp=int(time.time()) + 3600)
        writer = DraftWriter(
            pool, reply_id=message_id, chat_id=chat_id, text=FAN_OUT_DRAFT, interval=0,
            transport=transport,
        )  # fmt: skip
        async with running_stack(url, draft_transport=transport) as stack:

            async def subscriber() -> None:
                client = AsyncRealtimeClient(f"{stack.origin}/realtime/v1", token=anon_key())
                clients.append(client)
                await client.set_auth(token)
                channel = client.channel(chat_topic(chat_id), options(private=True))
                filter_ = f"chat_id=eq.{chat_id}"
                channel.on_postgres_changes(
                    ALL, lambda _: None, table="message", schema="public", filter=filter_
                )
                if transport == "table":
                    channel.on_postgres_changes(
                        ALL, on_table, table="message_draft", schema="public", filter=filter_
                    )
                else:
                    channel.on_broadcast("draft", on_broadcast)
                await channel.subscribe()
                assert channel.is_joined, "a subscriber could not join"

            for level in o.subscribers:
                while len(clients) < level:
                    await asyncio.gather(
                        *(subscriber() for _ in range(min(50, level - len(clients))))
                    )
                await asyncio.sleep(0.5)  # joins settled
                hub: Hub = stack.app.state.realtime_hub
                before = replace(hub.stats)
                row = FanOut(transport, level, o.changes, before)
                for _ in range(o.changes):
                    await writer.append(FAN_OUT_STEP)
                    committed = time.time()
                    seq = writer.writes
                    async with asyncio.timeout(120):
                        while len(received[seq]) < level:  # noqa: ASYNC110 (callbacks signal nothing)
                            await asyncio.sleep(0.005)
                    row.seconds.append(max(received[seq]) - committed)
                    await asyncio.sleep(0.2)
                after = hub.stats
                row.stats = Stats(**{
                    name: getattr(after, name) - getattr(before, name)
                    for name in Stats.__dataclass_fields__
                })  # fmt: skip
                rows.append(row)
            for client in clients:
                await client.close()
    finally:
        await pool.close()
    return rows


def streaming_tables(report: Report, rows: list[Streamed]) -> None:
    t = Table(
        "1. Drafts per streaming message: Postgres Changes (table) against Broadcast",
        ("transport", "tokens/s", "chars", "drafts", "events", "bytes", "bytes/event",
         "delivery p50 ms", "delivery p95 ms", "token→subscriber p95 ms", "WAL bytes",
         "WAL/draft", "final = content"),
    )  # fmt: skip
    for r in rows:
        t.add(
            r.transport, r.rate, r.chars, r.writes, r.events, r.bytes,
            f"{r.bytes / r.events:.0f}" if r.events else "-", ms(p50(r.delivery)),
            ms(p95(r.delivery)), ms(p95(r.shown)), r.wal,
            f"{r.wal / r.writes:.0f}" if r.writes else "-", "yes" if r.final_equal else "NO",
        )  # fmt: skip
    t.notes.append(
        "Delivery: from the draft's commit (its timestamp from a logical slot) to the"
        " supabase-py callback. WAL: pg_current_wal_lsn from the first draft to the draft's"
        " removal, the whole server's (nothing else writes meanwhile)."
    )
    report.tables.append(t)
    ratios = Table(
        "2. Table over broadcast, per streaming message",
        ("tokens/s", "WAL bytes", "WAL per draft", "bytes received", "delivery p95"),
    )
    for rate in sorted({r.rate for r in rows}):
        table = next(r for r in rows if r.rate == rate and r.transport == "table")
        broadcast = next(r for r in rows if r.rate == rate and r.transport == "broadcast")
        ratios.add(
            rate, _x(table.wal, broadcast.wal),
            _x(table.wal / table.writes, broadcast.wal / broadcast.writes),
            _x(table.bytes, broadcast.bytes), _x(p95(table.delivery), p95(broadcast.delivery)),
        )  # fmt: skip
    report.tables.append(ratios)
    broadcasts = [r for r in rows if r.transport == "broadcast"]
    lag = max(p95(r.delivery) for r in broadcasts) * 1000
    report.check("broadcast delivery lag p95, worst rate", f"{lag:.0f} ms", "<= 150 ms", lag <= 150)
    worst = min(
        (t.wal / t.writes) / (b.wal / b.writes)
        for t in rows if t.transport == "table"
        for b in broadcasts if b.rate == t.rate
    )  # fmt: skip
    report.check(
        "WAL per draft, table / broadcast, worst rate", f"{worst:.1f}x", ">= 5x", worst >= 5
    )
    same = all(r.final_equal for r in rows)
    report.check("last draft equals the content", "yes" if same else "no", "yes", same)


def fan_out_table(report: Report, rows: list[FanOut]) -> None:
    t = Table(
        "3. Delivery work per change, subscribers of one chat",
        ("transport", "subscribers", "RLS checks", "RLS ms", "frames", "bytes (all frames)",
         "to all p50 ms", "to all max ms"),
    )  # fmt: skip
    for r in rows:
        n = r.changes
        t.add(
            r.transport, r.subscribers, f"{r.stats.rls_checks / n:.0f}",
            f"{r.stats.rls_seconds * 1000 / n:.1f}", f"{r.stats.changes_sent / n:.0f}",
            f"{r.stats.bytes / n:.0f}", ms(p50(r.seconds)), ms(max(r.seconds, default=math.nan)),
        )  # fmt: skip
    t.notes.append(
        "Per change (one draft write), averaged over the changes: the RLS checks the server ran"
        " to deliver it and their time on their connections (summed: they run ten at a time,"
        " the app's pool), the frames that carried it and the bytes sent meanwhile (heartbeat"
        " replies included), and how long from its commit until the last subscriber's callback"
        " had it. The server and every subscriber share this process and its 2 cores, as a"
        " simulation: the times are this machine's, the counts are Realtime's."
    )
    report.tables.append(t)


def _x(a: float, b: float) -> str:
    if not b or math.isnan(a) or math.isnan(b):
        return "-"
    return f"{a / b:.1f}x"


async def run(options: Options) -> Report:
    server = resolve_server_url()
    async with (
        logical_server(server) as (logical, how),
        migrated_template(logical) as template,
    ):
        report = Report(await machine(logical))
        report.machine.append(f"Postgres: {how}")
        async with fresh_database(logical, template) as url:
            streaming_tables(report, await streaming_section(url, options))
        fan: list[FanOut] = []
        for transport in TRANSPORTS:
            async with fresh_database(logical, template) as url:
                fan += await fan_out(url, transport, options)
        fan_out_table(report, fan)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small samples, for a smoke run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    report = asyncio.run(run(Options.quick_run() if args.quick else Options()))
    print(report.render())
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
