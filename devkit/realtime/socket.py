"""One Phoenix socket per connection (endpoint.py accepts it): its channels, and the events a
Realtime client sends (RealtimeWeb.UserSocket and RealtimeWeb.RealtimeChannel)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from fastapi import WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketState

from devkit.change_feed import ChangeFeedUnavailable
from devkit.realtime.authorization import PolicyError, ReadPolicies, read_policies
from devkit.realtime.channels import Channel
from devkit.realtime.hub import Hub
from devkit.realtime.joins import (
    TOPIC_PREFIX,
    JoinRequest,
    read_join,
    replay_refusal,
    topic_refusal,
)
from devkit.realtime.protocol import (
    ACCESS_TOKEN,
    BROADCAST,
    HEARTBEAT,
    JOIN,
    LEAVE,
    PHOENIX,
    PRESENCE,
    Frame,
    Message,
    ProtocolError,
    Serializer,
    Unsupported,
    reply,
)
from devkit.realtime.tokens import TokenRefused

logger = logging.getLogger(__name__)

# Frames waiting for a client that does not read: past this, its socket is closed.
MAX_OUTBOX = 10_000
# Realtime's max_channels_per_client (TENANT_MAX_CHANNELS_PER_CLIENT), its default: joined
# channels one socket may hold; a join past it is refused, and a leave makes room.
MAX_CHANNELS_PER_CLIENT = 100
PROTOCOL_ERROR = 1002  # the close code of a socket that sent a frame it cannot read


def close_reason(text: str) -> str:
    """`text` cut to what a close frame holds (123 bytes of UTF-8)."""
    return text.encode()[:123].decode(errors="ignore")


class Session:
    """One connection: its serializer, its channels by topic, and one writer, so frames leave in
    the order they were queued."""

    def __init__(
        self,
        websocket: WebSocket,
        serializer: Serializer,
        hub: Hub,
        token: str,
    ) -> None:
        self.websocket = websocket
        self.serializer = serializer
        self.hub = hub
        self.token = token  # the connection's key: a join without a token of its own uses it
        self.channels: dict[str, Channel] = {}
        self.bytes_sent = 0
        self.frames_sent = 0
        self._outbox: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._background: set[asyncio.Future[Any]] = set()
        self._closing = False

    async def run(self) -> None:
        writer = asyncio.create_task(self._write())
        try:
            while True:
                received = await self.websocket.receive()
                if received["type"] == "websocket.disconnect":
                    break
                data: Frame | None = received.get("text")
                if data is None:
                    data = received.get("bytes")
                if data is None:
                    continue
                try:
                    message = self.serializer.decode(data)
                except Unsupported as error:
                    logger.info("unsupported realtime frame", extra={"reason": str(error)})
                    continue
                except ProtocolError as error:
                    # Phoenix ends a socket whose frame it cannot decode; here with a close
                    # frame that says why, so the client knows it was not the network.
                    logger.info("unreadable realtime frame", extra={"reason": str(error)})
                    await self.close(PROTOCOL_ERROR, close_reason(str(error)))
                    break
                await self.handle(message)
        except WebSocketDisconnect:
            pass
        finally:
            self._closing = True
            for channel in list(self.channels.values()):
                await channel.close(notify=False)
            self._outbox.put_nowait(None)
            writer.cancel()
            for task in self._background:
                task.cancel()

    def push(self, message: Message) -> None:
        self.send(self.serializer.encode(message))

    def reply(self, message: Message, status: Literal["ok", "error"], response: Any) -> None:
        self.push(reply(message, status, response))

    def send(self, frame: Frame) -> None:
        if self._closing:
            return
        if self._outbox.qsize() >= MAX_OUTBOX:
            logger.warning("realtime client does not read: closing its socket")
            self.keep(asyncio.ensure_future(self.close(1008)))
            return
        self._outbox.put_nowait(frame)

    def keep(self, task: asyncio.Future[Any]) -> None:
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def forget(self, channel: Channel) -> None:
        if self.channels.get(channel.topic) is channel:
            del self.channels[channel.topic]

    async def close(self, code: int, reason: str | None = None) -> None:
        if self._closing:
            return
        self._closing = True
        if self.websocket.client_state == WebSocketState.CONNECTED:
            await self.websocket.close(code, reason)

    async def _write(self) -> None:
        stats = self.hub.stats
        while (frame := await self._outbox.get()) is not None:
            try:
                if isinstance(frame, bytes):
                    await self.websocket.send_bytes(frame)
                    size = len(frame)
                else:
                    await self.websocket.send_text(frame)
                    size = len(frame.encode())
            except (WebSocketDisconnect, RuntimeError):
                return
            self.bytes_sent += size
            self.frames_sent += 1
            stats.bytes += size
            stats.frames += 1

    async def handle(self, message: Message) -> None:
        if message.topic == PHOENIX and message.event == HEARTBEAT:
            self.reply(message, "ok", {})
            return
        if message.event == JOIN:
            await self._join(message)
            return
        channel = self.channels.get(message.topic)
        if channel is None:
            # Phoenix's answers for a topic this socket has not joined.
            if message.event == LEAVE:
                self.reply(message, "ok", {})
            else:
                self.reply(message, "error", {"reason": "unmatched topic"})
            return
        if message.join_ref and message.join_ref != channel.join_ref:
            return  # for an earlier join of the topic: Phoenix ignores it
        if message.event == LEAVE:
            self.reply(message, "ok", {})
            await channel.close()
        elif message.event == ACCESS_TOKEN:
            payload = message.payload if isinstance(message.payload, dict) else {}
            await channel.refresh(payload.get("access_token"))
        elif message.event == BROADCAST:
            await channel.client_broadcast(message)
        elif message.event == PRESENCE:
            self.reply(message, "error", {"reason": "Presence is not available on this server"})
        # Anything else Realtime logs and ignores.

    async def _join(self, message: Message) -> None:
        topic = message.topic
        if (refusal := topic_refusal(topic)) is not None:
            self.reply(message, "error", {"reason": refusal})
            return
        if (existing := self.channels.get(topic)) is not None:
            await existing.close()  # Phoenix closes a topic's channel before joining it again
        if len(self.channels) >= MAX_CHANNELS_PER_CLIENT:
            self.reply(message, "error", {"reason": "ChannelRateLimitReached: Too many channels"})
            return
        request = read_join(message.payload)
        token = request.access_token or self.token
        try:
            verified = await self.hub.tokens.verify(token)
        except TokenRefused as refused:
            self.reply(message, "error", {"reason": refused.reason})
            return
        if request.replay:
            self.reply(message, "error", {"reason": replay_refusal(request.private)})
            return
        policies = None
        if request.private:
            policies = await self._read_policies(topic, verified.claims, request.presence)
            if policies is None:
                reason = (
                    "Unauthorized: You do not have permissions to read from this Channel topic:"
                    f" {topic.removeprefix(TOPIC_PREFIX)}"
                )
                self.reply(message, "error", {"reason": reason})
                return
        channel = Channel(
            self,
            topic=topic,
            join_ref=message.join_ref or message.ref,
            token=token,
            claims=verified.claims,
            private=request.private,
            bindings=request.bindings,
            self_broadcast=request.self_broadcast,
            ack_broadcast=request.ack_broadcast,
            policies=policies,
        )
        binding_error = request.binding_error or await channel.check_bindings()
        self.channels[topic] = channel
        unavailable = await self.hub.join(channel)
        channel.start(verified.expires_in_s)
        self.reply(message, "ok", {"postgres_changes": request.answered()})
        _announce(channel, request, binding_error, unavailable)

    async def _read_policies(
        self, topic: str, claims: dict[str, Any], presence: bool
    ) -> ReadPolicies | None:
        """The private channel's read policies; None when they let the subscriber read nothing
        (or cannot be read)."""
        try:
            policies = await read_policies(
                self.hub.pool, topic.removeprefix(TOPIC_PREFIX), claims, presence=presence
            )
        except PolicyError:
            return None
        return policies if policies.broadcast or policies.presence else None


def _announce(
    channel: Channel,
    request: JoinRequest,
    binding_error: str | None,
    unavailable: ChangeFeedUnavailable | None,
) -> None:
    """After the join's reply, the `system` message Realtime sends on: whether its Postgres
    Changes are subscribed, or why the feed behind a private channel is missing."""
    if request.requested:
        if binding_error is not None:
            channel.push_system("postgres_changes", "error", binding_error)
        elif unavailable is not None:
            channel.push_system("postgres_changes", "error", str(unavailable))
        else:
            channel.push_system("postgres_changes", "ok", "Subscribed to PostgreSQL")
    elif unavailable is not None and request.private:
        channel.push_system("system", "error", str(unavailable))
