"""The chat's `message` and `message_draft` rows as they change, followed as a frontend follows
them: through Supabase Realtime on the chat's private channel, with supabase-py's client (the dev
server speaks Realtime's protocol); where the server cannot follow the database (no logical
decoding), or the subscription is lost, from the history, polled."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import httpx
from realtime import (
    AsyncRealtimeChannel,
    RealtimeChannelOptions,
    RealtimePostgresChangesListenEvent,
    RealtimeSubscribeStates,
)
from realtime.types import PostgresChangesPayload
from supabase import AsyncClient, AsyncClientOptions, acreate_client

from devkit.terminal_chat.client import Session, server_gone

POLL_S = 0.5  # history polling, when the server cannot decode changes
SUBSCRIBE_TIMEOUT_S = 15
# Leaving the channel and closing the socket, at the end: a server that stopped answering gets
# no longer than this.
LEAVE_TIMEOUT_S = 2
# Put on the changes queue when they can no longer be read: the server is gone.
SERVER_GONE: dict[str, Any] = {"table": None}

logger = logging.getLogger(__name__)


@asynccontextmanager
async def message_changes(
    session: Session, fallback: Callable[[str], None]
) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
    """Rows of `message` and `message_draft` as they change, from the moment this yields, each
    as `{"table", "eventType", "new"}`; SERVER_GONE once they cannot be read any more.
    `fallback` hears why, when the subscription is refused and the history is polled instead."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    ready: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    tasks: list[asyncio.Task[None]] = []
    polling = False

    def poll() -> None:
        nonlocal polling
        if not polling:
            polling = True
            tasks.append(asyncio.create_task(_poll_history(session, queue)))

    def on_change(payload: PostgresChangesPayload) -> None:
        data: Any = payload["data"]
        queue.put_nowait({"table": data["table"], "eventType": data["type"], "new": data["record"]})

    def on_system(payload: Any) -> None:
        # "Subscribed to PostgreSQL": from here on, no change is missed.
        if payload.extension == "postgres_changes" and not ready.done():
            ready.set_result(None)

    def on_state(state: RealtimeSubscribeStates, error: Exception | None) -> None:
        if state == RealtimeSubscribeStates.SUBSCRIBED:
            return
        # Refused, or lost (a system error: the server cannot decode changes, or dropped the
        # channel; or the socket closed): the history tells what happens next, or that the
        # server is gone.
        if not ready.done():
            ready.set_result(_reason(error) or state.value)
        else:
            logger.debug("realtime subscription lost: %s", _reason(error) or state.value)
            poll()

    # The socket is not reconnected: a lost subscription falls back to polling the history.
    options = AsyncClientOptions(realtime={"auto_reconnect": False})
    client = await acreate_client(session.origin, session.anon_key, options)
    try:
        await client.realtime.set_auth(session.token)  # the user's token: their RLS applies
        channel = client.channel(f"chat:{session.chat_id}", private_channel())
        _listen(channel, session, on_change)
        channel.on_system(on_system)
        if (problem := await _subscribe(channel, on_state, ready, session.origin)) is not None:
            fallback(problem)
            poll()
        yield queue
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with suppress(asyncio.CancelledError):
                await task
        await _leave(client)


def _listen(
    channel: AsyncRealtimeChannel,
    session: Session,
    on_change: Callable[[PostgresChangesPayload], None],
) -> None:
    """The chat's messages and drafts, as they change."""
    for table in ("message", "message_draft"):
        channel.on_postgres_changes(
            RealtimePostgresChangesListenEvent.All,
            on_change,
            table=table,
            schema="public",
            filter=f"chat_id=eq.{session.chat_id}",
        )


async def _subscribe(
    channel: AsyncRealtimeChannel,
    on_state: Callable[[RealtimeSubscribeStates, Exception | None], None],
    ready: asyncio.Future[str | None],
    origin: str,
) -> str | None:
    """Join the channel: None once its changes are subscribed, else why they are not."""
    try:
        async with asyncio.timeout(SUBSCRIBE_TIMEOUT_S):
            await channel.subscribe(on_state)
            return await asyncio.shield(ready)
    except (OSError, TimeoutError) as exc:
        raise server_gone(origin) from exc
    except Exception as exc:  # the handshake refused (websockets' InvalidStatus, …)
        return str(exc)


def private_channel() -> RealtimeChannelOptions:
    """supabase-py's defaults, private: the chat's channel is joined only when the policies on
    realtime.messages let the user read it. (A new dict each time: subscribing writes to it.)"""
    return {
        "config": {
            "broadcast": {"ack": False, "self": False},
            "presence": {"key": "", "enabled": False},
            "private": True,
        }
    }


def _reason(error: Exception | None) -> str | None:
    """What Realtime said: a system error's message (supabase-py passes its payload as JSON)."""
    if error is None:
        return None
    try:
        said = json.loads(str(error))
    except ValueError:
        return str(error)
    if isinstance(said, dict) and isinstance(said.get("message") or said.get("reason"), str):
        return str(said.get("message") or said.get("reason"))
    return str(error)


async def _leave(client: AsyncClient) -> None:
    try:
        async with asyncio.timeout(LEAVE_TIMEOUT_S):
            await client.remove_all_channels()
    except Exception as exc:  # a server gone or stopped: nothing to leave
        logger.debug("realtime leave failed", exc_info=exc)
        with suppress(Exception):
            await client.realtime.close()


async def _poll_history(session: Session, queue: asyncio.Queue[dict[str, Any]]) -> None:
    """The feed's `message` changes, read from the history endpoint instead."""
    while True:
        try:
            response = await session.history()
        except httpx.TransportError:
            queue.put_nowait(SERVER_GONE)
            return
        for message in response.json().get("messages", []) if response.is_success else []:
            metadata = {
                "snapshot": {"progress": message.get("progress", [])},
                "pendingApproval": message.get("pendingApproval"),
                "pendingQuestion": message.get("pendingQuestion"),
            }
            row = {**message, "metadata": metadata}
            queue.put_nowait({"table": "message", "eventType": "UPDATE", "new": row})
        await asyncio.sleep(POLL_S)
