"""The clients a frontend uses, against the dev server's Realtime endpoint: supabase-py's
(`acreate_client(...).channel(...)`), and a bare websocket for the V2 protocol supabase-js
speaks. Shared by the tests and the benchmarks."""

from __future__ import annotations

import asyncio
import json
import struct
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import jwt
from realtime import (
    AsyncRealtimeChannel,
    RealtimeChannelOptions,
    RealtimePostgresChangesListenEvent,
    RealtimeSubscribeStates,
)
from supabase import AsyncClient, acreate_client
from websockets.asyncio.client import ClientConnection, connect

from tests.support import JWT_SECRET

ALL = RealtimePostgresChangesListenEvent.All


def options(*, private: bool, self_broadcast: bool = False) -> RealtimeChannelOptions:
    """A channel's config as supabase-py's defaults have it, private or public."""
    return {
        "config": {
            "broadcast": {"ack": False, "self": self_broadcast},
            "presence": {"key": "", "enabled": False},
            "private": private,
        }
    }


def anon_key(secret: str = JWT_SECRET) -> str:
    """The project's anon key, as Supabase makes it: a JWT with role `anon`."""
    now = int(time.time())
    claims = {"role": "anon", "iss": "supabase", "iat": now, "exp": now + 3600}
    return jwt.encode(claims, secret, "HS256")


@dataclass
class Inbox:
    """What a channel's callbacks received, in order, with when (unix seconds)."""

    items: list[tuple[str, Any]] = field(default_factory=list)
    at: list[float] = field(default_factory=list)
    _new: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, kind: str, item: Any) -> None:
        self.items.append((kind, item))
        self.at.append(time.time())
        self._new.set()

    def timed(self, kind: str) -> list[tuple[float, Any]]:
        return [(at, item) for at, (k, item) in zip(self.at, self.items, strict=True) if k == kind]

    def callback(self, kind: str) -> Callable[[Any], None]:
        return lambda item: self.put(kind, item)

    def of(self, kind: str) -> list[Any]:
        return [item for k, item in self.items if k == kind]

    async def until(
        self, found: Callable[[list[tuple[str, Any]]], bool], wait_s: float = 20
    ) -> None:
        """Wait until `found` accepts what came so far."""
        async with asyncio.timeout(wait_s):
            while not found(self.items):
                self._new.clear()
                await self._new.wait()


@asynccontextmanager
async def supabase_client(origin: str, token: str | None = None) -> AsyncIterator[AsyncClient]:
    """supabase-py's client on the dev server, with the anon key; `token`: the user's access
    token, as a signed-in client sets it on Realtime."""
    client = await acreate_client(origin, anon_key())
    if token is not None:
        await client.realtime.set_auth(token)
    try:
        yield client
    finally:
        await client.remove_all_channels()


async def subscribed(
    channel: AsyncRealtimeChannel, inbox: Inbox | None = None
) -> RealtimeSubscribeStates:
    """Subscribe and return the state the join ended in (subscribe waits for the reply)."""
    states: list[RealtimeSubscribeStates] = []

    def on_state(state: RealtimeSubscribeStates, error: Exception | None) -> None:
        states.append(state)
        if inbox is not None:
            inbox.put("state", (state, str(error) if error else None))

    await channel.subscribe(on_state)
    return states[0] if states else RealtimeSubscribeStates.TIMED_OUT


def chat_channel(
    client: AsyncClient, chat_id: uuid.UUID, inbox: Inbox, *, drafts: bool = True
) -> AsyncRealtimeChannel:
    """The chat's private channel as a frontend joins it: its messages (and drafts as
    message_draft rows, with `drafts`) as Postgres Changes, drafts as broadcasts, system
    messages."""
    channel = client.channel(f"chat:{chat_id}", options(private=True))
    filter_ = f"chat_id=eq.{chat_id}"
    channel.on_postgres_changes(
        ALL, inbox.callback("message"), table="message", schema="public", filter=filter_
    )
    if drafts:
        channel.on_postgres_changes(
            ALL, inbox.callback("message_draft"), table="message_draft", schema="public",
            filter=filter_,
        )  # fmt: skip
    channel.on_broadcast("draft", inbox.callback("draft"))
    channel.on_system(inbox.callback("system"))
    return channel


class V2Socket:
    """Realtime's V2 protocol (supabase-js's default, `vsn=2.0.0`) over a bare websocket:
    `[join_ref, ref, topic, event, payload]` text frames, binary user broadcasts."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ref = 0

    def ref(self) -> str:
        self._ref += 1
        return str(self._ref)

    async def send(
        self, topic: str, event: str, payload: Any, *, join_ref: str | None = None
    ) -> str:
        ref = self.ref()
        await self.ws.send(json.dumps([join_ref, ref, topic, event, payload]))
        return ref

    async def send_user_broadcast(
        self, topic: str, event: str, payload: Any, join_ref: str
    ) -> None:
        """A broadcast as realtime-js's serializer encodes it (kind 3, JSON payload)."""
        parts = [join_ref.encode(), self.ref().encode(), topic.encode(), event.encode(), b""]
        header = struct.pack("!7B", 3, *(len(p) for p in parts), 1)
        await self.ws.send(header + b"".join(parts) + json.dumps(payload).encode())

    async def receive(self, wait_s: float = 20) -> tuple[str | None, str | None, str, str, Any]:
        """The next frame as (join_ref, ref, topic, event, payload); a binary user broadcast
        decoded as realtime-js decodes it."""
        async with asyncio.timeout(wait_s):
            frame = await self.ws.recv()
        if isinstance(frame, bytes):
            return decode_user_broadcast(frame)
        join_ref, ref, topic, event, payload = json.loads(frame)
        return join_ref, ref, topic, event, payload

    async def until(
        self, event: str, *, topic: str | None = None, wait_s: float = 20
    ) -> tuple[str | None, str | None, str, str, Any]:
        """The next frame of `event` (on `topic`), skipping others."""
        async with asyncio.timeout(wait_s):
            while True:
                frame = await self.receive(wait_s)
                if frame[3] == event and (topic is None or frame[2] == topic):
                    return frame


def decode_user_broadcast(frame: bytes) -> tuple[None, None, str, str, Any]:
    """realtime-js serializer.ts `_decodeUserBroadcast`: kind 4."""
    kind, topic_size, event_size, meta_size, encoding = struct.unpack_from("!5B", frame)
    assert kind == 4, kind
    at = 5
    topic = frame[at : at + topic_size].decode()
    at += topic_size
    event = frame[at : at + event_size].decode()
    at += event_size
    meta = frame[at : at + meta_size].decode()
    at += meta_size
    body = frame[at:]
    data: dict[str, Any] = {
        "type": "broadcast",
        "event": event,
        "payload": json.loads(body) if encoding == 1 else body,
    }
    if meta_size:
        data["meta"] = json.loads(meta)
    return None, None, topic, "broadcast", data


@asynccontextmanager
async def v2_socket(origin: str, apikey: str | None = None) -> AsyncIterator[V2Socket]:
    url = origin.replace("http://", "ws://") + "/realtime/v1/websocket"
    async with connect(f"{url}?apikey={apikey or anon_key()}&vsn=2.0.0") as ws:
        yield V2Socket(ws)
