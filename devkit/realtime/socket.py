"""The websocket at /realtime/v1/websocket: one Phoenix socket per connection, its channels, and
the events a Realtime client sends (RealtimeWeb.UserSocket and RealtimeWeb.RealtimeChannel)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocketState

from devkit import changes
from devkit.realtime.authorization import PolicyError, read_policies
from devkit.realtime.bindings import Binding, BindingError, binding_id, parse_binding
from devkit.realtime.channels import Channel, Hub, flexible_bool
from devkit.realtime.protocol import (
    ACCESS_TOKEN,
    BROADCAST,
    HEARTBEAT,
    JOIN,
    LEAVE,
    PHOENIX,
    PRESENCE,
    SERIALIZERS,
    Frame,
    Message,
    ProtocolError,
    Serializer,
    Unsupported,
    reply,
)
from devkit.realtime.tokens import RealtimeTokens, TokenRefused
from infra.runtime import Services

logger = logging.getLogger(__name__)

REALTIME_PATH = "/realtime/v1/websocket"
# Frames waiting for a client that does not read: past this, its socket is closed.
MAX_OUTBOX = 10_000
# Realtime's max_channels_per_client (TENANT_MAX_CHANNELS_PER_CLIENT), its default: joined
# channels one socket may hold; a join past it is refused, and a leave makes room.
MAX_CHANNELS_PER_CLIENT = 100
PROTOCOL_ERROR = 1002  # the close code of a socket that sent a frame it cannot read
router = APIRouter()


async def realtime_hub(app: FastAPI) -> Hub:
    """The app's hub, made on first use, on the app's change feed."""
    hub: Hub | None = getattr(app.state, "realtime_hub", None)
    if hub is None:
        services: Services = app.state.services
        feed = await changes.change_feed(app, services)
        hub = Hub(await services.pool(), feed, RealtimeTokens(services.settings))
        app.state.realtime_hub = hub
        # Before the feed's own hook (added first), which releases the slot.
        app.state.on_shutdown.insert(0, hub.close)
    return hub


@router.websocket(REALTIME_PATH)
async def realtime_socket(websocket: WebSocket) -> None:
    """Realtime's websocket endpoint, as supabase-js and supabase-py connect to it."""
    vsn = websocket.query_params.get("vsn", "1.0.0")
    serializer = SERIALIZERS.get(vsn)
    if serializer is None:
        await _deny(websocket, 403, f"unsupported protocol version {vsn!r}: 1.0.0 or 2.0.0")
        return
    hub = await realtime_hub(websocket.app)
    token = websocket.headers.get("x-api-key") or websocket.query_params.get("apikey")
    try:
        await hub.tokens.verify(token)
    except TokenRefused as refused:
        await _deny(websocket, 401, refused.http_message)
        return
    await websocket.accept()
    session = Session(websocket, serializer, hub, str(token))
    hub.sessions.add(session)
    try:
        await session.run()
    finally:
        hub.sessions.discard(session)


def close_reason(text: str) -> str:
    """`text` cut to what a close frame holds (123 bytes of UTF-8)."""
    return text.encode()[:123].decode(errors="ignore")


async def _deny(websocket: WebSocket, status: int, message: str) -> None:
    """The handshake's HTTP answer, as Realtime's error handler sends it (where the server can
    send one; else the handshake is refused with 403)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse({"error": message}, status))
    else:
        await websocket.close(1008, message)


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
        if not topic.startswith("realtime:"):
            self.reply(message, "error", {"reason": "unmatched topic"})
            return
        if topic == "realtime:":
            reason = "TopicNameRequired: You must provide a topic name"
            self.reply(message, "error", {"reason": reason})
            return
        if (existing := self.channels.get(topic)) is not None:
            await existing.close()  # Phoenix closes a topic's channel before joining it again
        if len(self.channels) >= MAX_CHANNELS_PER_CLIENT:
            self.reply(message, "error", {"reason": "ChannelRateLimitReached: Too many channels"})
            return
        payload = message.payload if isinstance(message.payload, dict) else {}
        config = payload.get("config") if isinstance(payload.get("config"), dict) else {}
        assert isinstance(config, dict)
        access_token = payload.get("access_token") or payload.get("user_token")
        if not isinstance(access_token, str) or access_token.startswith("sb_"):
            access_token = self.token
        try:
            verified = await self.hub.tokens.verify(access_token)
        except TokenRefused as refused:
            self.reply(message, "error", {"reason": refused.reason})
            return
        private = flexible_bool(config.get("private", False))
        broadcast = config.get("broadcast") if isinstance(config.get("broadcast"), dict) else {}
        presence = config.get("presence") if isinstance(config.get("presence"), dict) else {}
        assert isinstance(broadcast, dict)
        assert isinstance(presence, dict)
        if "replay" in broadcast:
            reason = (
                "Replay is not allowed for public channels"
                if not private
                else "Replay is not available on this development server"
            )
            self.reply(message, "error", {"reason": f"UnableToReplayMessages: {reason}"})
            return
        sub_topic = topic.removeprefix("realtime:")
        policies = None
        if private:
            try:
                policies = await read_policies(
                    self.hub.pool,
                    sub_topic,
                    verified.claims,
                    presence=flexible_bool(presence.get("enabled", False)),
                )
            except PolicyError:
                policies = None
            if policies is None or not (policies.broadcast or policies.presence):
                reason = (
                    "Unauthorized: You do not have permissions to read from this Channel topic:"
                    f" {sub_topic}"
                )
                self.reply(message, "error", {"reason": reason})
                return
        raw = config.get("postgres_changes")
        requested = [p for p in raw if p is not None] if isinstance(raw, list) else []
        bindings: list[Binding] = []
        parse_error = None
        for params in requested:
            try:
                bindings.append(parse_binding(params))
            except BindingError as error:
                parse_error = parse_error or str(error)
        channel = Channel(
            self,
            topic=topic,
            join_ref=message.join_ref or message.ref,
            token=access_token,
            claims=verified.claims,
            private=private,
            bindings=[] if parse_error else bindings,
            self_broadcast=flexible_bool(broadcast.get("self", False)),
            ack_broadcast=flexible_bool(broadcast.get("ack", False)),
            policies=policies,
        )
        binding_error = parse_error or await channel.check_bindings()
        self.channels[topic] = channel
        unavailable = await self.hub.join(channel)
        channel.start(verified.expires_in_s)
        # Every binding asked for, with its id, as Realtime answers (even one it then refuses).
        answered = [{**p, "id": binding_id(p)} if isinstance(p, dict) else p for p in requested]
        self.reply(message, "ok", {"postgres_changes": answered})
        if requested:
            if binding_error is not None:
                channel.push_system("postgres_changes", "error", binding_error)
            elif unavailable is not None:
                channel.push_system("postgres_changes", "error", str(unavailable))
            else:
                channel.push_system("postgres_changes", "ok", "Subscribed to PostgreSQL")
        elif unavailable is not None and private:
            channel.push_system("system", "error", str(unavailable))


def install_realtime(app: FastAPI) -> None:
    """Serve Realtime's websocket on `app` (the development app)."""
    app.include_router(router)
