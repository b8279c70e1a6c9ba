"""Realtime's websocket frames: Phoenix channel messages in either serializer; no I/O.

`vsn=1.0.0` is Phoenix's V1 JSON serializer (what supabase-py speaks): one JSON object per text
frame, `{"topic", "event", "payload", "ref"}` (the server never sends `join_ref`). `vsn=2.0.0` is
Realtime's V2 serializer (supabase-js's default): a text frame is the array `[join_ref, ref,
topic, event, payload]`; binary frames carry user broadcasts, kind 3 from the client (a
`broadcast` push) and kind 4 to it, as `RealtimeWeb.Socket.V2Serializer` and realtime-js's
`serializer.ts` lay them out.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Frame = str | bytes

PHOENIX = "phoenix"
REPLY = "phx_reply"
JOIN = "phx_join"
LEAVE = "phx_leave"
CLOSE = "phx_close"
HEARTBEAT = "heartbeat"
ACCESS_TOKEN = "access_token"  # noqa: S105 (an event's name)
BROADCAST = "broadcast"
PRESENCE = "presence"
SYSTEM = "system"
POSTGRES_CHANGES = "postgres_changes"

# Binary frame kinds (V2): a client's user broadcast push, and a user broadcast to a client.
USER_BROADCAST_PUSH = 3
USER_BROADCAST = 4
BINARY_ENCODING, JSON_ENCODING = 0, 1


# Nesting past this is refused on reading: whatever is read is encoded again for every
# subscriber, and Python's json cannot encode (nor read) much deeper.
MAX_DEPTH = 64
# Text read from UTF-8 holds no surrogate: a lone one can only come from an escape.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class ProtocolError(ValueError):
    """A frame this serializer cannot read, or a message it cannot encode."""


class Unsupported(Exception):
    """A frame Realtime reads but this server does not serve (binary payloads)."""


def _no_constant(name: str) -> Any:
    raise ProtocolError(f"{name} is not JSON")


def loads(text: str | bytes, what: str) -> Any:
    """JSON as Realtime's parser reads it: UTF-8, no NaN or Infinity, no lone surrogate, nested
    at most MAX_DEPTH deep; ProtocolError otherwise."""
    try:
        if isinstance(text, bytes):
            text = text.decode()
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ProtocolError(f"{what} is nested too deeply") from None
    except ValueError as error:  # (UnicodeDecodeError among them)
        raise ProtocolError(f"{what} is not JSON: {error}") from None
    # Each walk costs a large payload about what reading it did: only when it may find something.
    if text.count("[") + text.count("{") > MAX_DEPTH:
        _check_depth(value, what)
    if SURROGATE_ESCAPE.search(text):
        _check_strings(value, what)
    return value


def _check_depth(value: Any, what: str) -> None:
    """Level by level, without recursion (the value may be deep)."""
    level, depth = [value], 1
    while level:
        if depth > MAX_DEPTH:
            raise ProtocolError(f"{what} is nested deeper than {MAX_DEPTH}")
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            below.extend([c for c in children if isinstance(c, dict | list)])
        level, depth = below, depth + 1


def _check_strings(value: Any, what: str) -> None:
    """Every string and key encodes as UTF-8 (json reads a lone surrogate's escape into one)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode()
                except UnicodeEncodeError:
                    raise ProtocolError(f"{what} has a lone surrogate") from None
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


@dataclass(frozen=True)
class Message:
    """A Phoenix message either way: a push, a reply (event phx_reply) or a broadcast."""

    topic: str
    event: str
    payload: Any
    ref: str | None = None
    join_ref: str | None = None


def reply(message: Message, status: Literal["ok", "error"], response: Any) -> Message:
    """The reply to `message`, as Phoenix sends it."""
    payload = {"status": status, "response": response}
    return Message(message.topic, REPLY, payload, message.ref, message.join_ref)


@dataclass(frozen=True)
class Broadcast:
    """A broadcast as a channel's subscribers receive it.

    `user`: a user broadcast (Broadcast from Database, or a V2 client's binary push) whose
    payload is JSON text, sent to V2 clients as a binary frame and to V1 clients as the JSON
    map `{"event", "payload", "type": "broadcast", "meta"}`. Otherwise the map a V1 client sent,
    `{"type": "broadcast", "event", "payload"}`, passed on as it came.
    """

    event: str
    payload: Any
    meta: dict[str, Any] | None = None
    user: bool = False
    # Encoded frames per (serializer, topic): encoded once, however many subscribers (None:
    # that serializer cannot carry it).
    frames: dict[tuple[str, str], Frame | None] = field(default_factory=dict, compare=False)

    def as_map(self) -> dict[str, Any]:
        if not self.user:
            return dict(self.payload)
        out: dict[str, Any] = {"event": self.event, "payload": self.payload, "type": BROADCAST}
        if self.meta:
            out["meta"] = self.meta
        return out


class Serializer(Protocol):
    vsn: str

    def decode(self, data: Frame) -> Message: ...

    def encode(self, message: Message) -> Frame: ...

    def broadcast(self, topic: str, broadcast: Broadcast) -> Frame: ...

    def postgres_change(self, topic: str, ids: list[int], data_json: str) -> Frame: ...


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class V1Serializer:
    vsn = "1.0.0"

    def decode(self, data: Frame) -> Message:
        if isinstance(data, bytes):
            raise ProtocolError("V1 takes text frames only")
        raw = loads(data, "frame")
        if not isinstance(raw, dict) or not isinstance(raw.get("topic"), str):
            raise ProtocolError("V1 expects a map with a topic")
        if not isinstance(raw.get("event"), str):
            raise ProtocolError("V1 expects a map with an event")
        return Message(
            raw["topic"], raw["event"], raw.get("payload"), _ref(raw.get("ref")),
            _ref(raw.get("join_ref")),
        )  # fmt: skip

    def encode(self, message: Message) -> Frame:
        return _dumps(
            {
                "topic": message.topic,
                "event": message.event,
                "payload": message.payload,
                "ref": message.ref,
            }
        )

    def broadcast(self, topic: str, broadcast: Broadcast) -> Frame:
        return self.encode(Message(topic, BROADCAST, broadcast.as_map()))

    def postgres_change(self, topic: str, ids: list[int], data_json: str) -> Frame:
        return (
            f'{{"topic":{_dumps(topic)},"event":"postgres_changes",'
            f'"payload":{{"ids":{_dumps(ids)},"data":{data_json}}},"ref":null}}'
        )


class V2Serializer:
    vsn = "2.0.0"

    def decode(self, data: Frame) -> Message:
        if isinstance(data, bytes):
            return self._decode_binary(data)
        raw = loads(data, "frame")
        if not isinstance(raw, list) or len(raw) < 5:
            raise ProtocolError("expected V2 array")
        join_ref, ref, topic, event, payload = raw[:5]
        if not isinstance(topic, str) or not isinstance(event, str):
            raise ProtocolError("expected V2 array")
        return Message(topic, event, payload, _ref(ref), _ref(join_ref))

    def _decode_binary(self, data: bytes) -> Message:
        if not data or data[0] != USER_BROADCAST_PUSH:
            raise ProtocolError("the only binary frame a client may send is a user broadcast push")
        if len(data) < 7:
            raise ProtocolError("binary frame shorter than its header")
        sizes = struct.unpack_from("!6B", data, 1)
        join_ref_size, ref_size, topic_size, event_size, meta_size, encoding = sizes
        at = 7
        parts = []
        for size in (join_ref_size, ref_size, topic_size, event_size, meta_size):
            if at + size > len(data):
                raise ProtocolError("binary frame shorter than its header says")
            try:
                parts.append(data[at : at + size].decode())
            except UnicodeDecodeError:
                raise ProtocolError("binary frame header is not UTF-8") from None
            at += size
        join_ref, ref, topic, event, meta = parts
        body = data[at:]
        if encoding == BINARY_ENCODING:
            raise Unsupported("binary broadcast payloads are not supported here")
        payload = loads(body, "broadcast payload") if body else {}
        if meta:
            # Read as Realtime reads it, and then left out as Realtime leaves it out: a client's
            # metadata is not sent on (BroadcastHandler.build_broadcast).
            loads(meta, "broadcast metadata")
        user = Broadcast(event, payload, None, user=True)
        return Message(topic, BROADCAST, user, ref or None, join_ref or None)

    def encode(self, message: Message) -> Frame:
        return _dumps(
            [message.join_ref, message.ref, message.topic, message.event, message.payload]
        )

    def broadcast(self, topic: str, broadcast: Broadcast) -> Frame:
        if not broadcast.user:
            return self.encode(Message(topic, BROADCAST, broadcast.as_map()))
        head = [topic.encode(), broadcast.event.encode()]
        meta = _dumps(broadcast.meta).encode() if broadcast.meta else b""
        for part, name in ((head[0], "topic"), (head[1], "event"), (meta, "metadata")):
            if len(part) > 255:
                raise ProtocolError(f"{name} longer than 255 bytes")
        header = struct.pack("!5B", USER_BROADCAST, len(head[0]), len(head[1]), len(meta), 1)
        return header + head[0] + head[1] + meta + _dumps(broadcast.payload).encode()

    def postgres_change(self, topic: str, ids: list[int], data_json: str) -> Frame:
        return (
            f'[null,null,{_dumps(topic)},"postgres_changes",'
            f'{{"ids":{_dumps(ids)},"data":{data_json}}}]'
        )


SERIALIZERS: dict[str, Serializer] = {"1.0.0": V1Serializer(), "2.0.0": V2Serializer()}


def _ref(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)
