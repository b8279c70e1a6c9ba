"""What one client of the dev server's Realtime endpoint cannot do to its own session or to other
subscribers: frames it cannot read end that client's session, cleanly; a broadcast one
subscriber cannot be sent is dropped for that subscriber alone; channels per connection are
capped as Realtime caps them."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import ANY

from realtime import RealtimeSubscribeStates
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.realtime_clients import (
    Inbox,
    anon_key,
    chat_channel,
    options,
    subscribed,
    supabase_client,
    v2_socket,
)
from tests.support import Stack, create_user_with_chat, execute, running_stack, token_for

SUBSCRIBED = RealtimeSubscribeStates.SUBSCRIBED
DEEP = 100_000
NESTED = "[" * DEEP + "]" * DEEP
PROTOCOL_ERROR = 1002


def user_broadcast_push(
    topic: bytes, event: bytes, payload: bytes, *, meta: bytes = b"", join_ref: bytes = b"1"
) -> bytes:
    """A V2 binary push (kind 3) with whatever bytes a client puts in it."""
    parts = [join_ref, b"2", topic, event, meta]
    return struct.pack("!7B", 3, *(len(p) for p in parts), 1) + b"".join(parts) + payload


# Frames no client library sends, each as (serializer, frame).
UNREADABLE: dict[str, tuple[str, str | bytes]] = {
    "v1 nested 100,000 deep": ("1.0.0", NESTED),
    "v1 payload nested 100,000 deep": (
        "1.0.0",
        '{"topic":"phoenix","event":"heartbeat","ref":"1","payload":' + NESTED + "}",
    ),
    "v1 not JSON": ("1.0.0", '{"topic":'),
    "v1 NaN": ("1.0.0", '{"topic":"phoenix","event":"heartbeat","ref":"1","payload":NaN}'),
    "v1 a lone surrogate": (
        "1.0.0",
        '{"topic":"realtime:\\ud800","event":"phx_join","ref":"1","payload":{}}',
    ),
    "v1 a list": ("1.0.0", '["phoenix","heartbeat"]'),
    "v1 a number for the topic": ("1.0.0", '{"topic":1,"event":"heartbeat","ref":"1"}'),
    "v1 a map for the event": ("1.0.0", '{"topic":"phoenix","event":{},"ref":"1"}'),
    "v1 a binary frame": ("1.0.0", b'{"topic":"phoenix","event":"heartbeat"}'),
    "v2 nested 100,000 deep": ("2.0.0", NESTED),
    "v2 a map": ("2.0.0", '{"topic":"phoenix","event":"heartbeat"}'),
    "v2 too short an array": ("2.0.0", '[null,"1","phoenix"]'),
    "v2 a number for the topic": ("2.0.0", '[null,"1",5,"heartbeat",{}]'),
    "v2 invalid UTF-8 in the topic": ("2.0.0", user_broadcast_push(b"\xff\xfe", b"e", b"{}")),
    "v2 invalid UTF-8 in the payload": ("2.0.0", user_broadcast_push(b"room", b"e", b'"\xff"')),
    "v2 truncated": ("2.0.0", user_broadcast_push(b"realtime:room", b"event", b"")[:12]),
    "v2 a header cut short": ("2.0.0", b"\x03\x00\x01"),
    "v2 an empty binary frame": ("2.0.0", b""),
    "v2 a kind no client sends": ("2.0.0", b"\x04" + b"\x00" * 8),
    "v2 metadata not JSON": ("2.0.0", user_broadcast_push(b"room", b"e", b"{}", meta=b"{")),
    "v2 payload not JSON": ("2.0.0", user_broadcast_push(b"room", b"e", b"{")),
    "v2 NaN in the payload": ("2.0.0", user_broadcast_push(b"room", b"e", b'{"n":NaN}')),
}


class Tracebacks(logging.Handler):
    """Log records that carry a traceback, from the app and from uvicorn (which does not
    propagate to the root logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or "Traceback" in record.getMessage():
            self.records.append(record)


@contextmanager
def tracebacks() -> Iterator[Tracebacks]:
    handler = Tracebacks()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn.error")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def ws_url(stack: Stack, vsn: str) -> str:
    url = stack.origin.replace("http://", "ws://") + "/realtime/v1/websocket"
    return f"{url}?apikey={anon_key()}&vsn={vsn}"


async def close_after(stack: Stack, vsn: str, frame: str | bytes) -> tuple[int, str] | None:
    """The close frame the server answers `frame` with (None: none, or the socket stayed)."""
    async with connect(ws_url(stack, vsn), max_size=None) as ws:
        await ws.send(frame)
        try:
            async with asyncio.timeout(10):
                while True:
                    await ws.recv()
        except ConnectionClosed as closed:
            return (closed.rcvd.code, closed.rcvd.reason) if closed.rcvd else None
        except TimeoutError:
            return None


async def heartbeat(stack: Stack, vsn: str) -> Any:
    """A fresh socket's heartbeat reply: the endpoint still serves."""
    async with connect(ws_url(stack, vsn)) as ws:
        if vsn == "1.0.0":
            await ws.send(json.dumps({"topic": "phoenix", "event": "heartbeat", "ref": "1"}))
            return json.loads(await ws.recv())["payload"]
        await ws.send(json.dumps([None, "1", "phoenix", "heartbeat", {}]))
        return json.loads(await ws.recv())[4]


async def test_an_unreadable_frame_ends_its_session_with_a_close_frame(
    database_url: str,
) -> None:
    closes: dict[str, tuple[int, str] | None] = {}
    async with running_stack(database_url) as stack:
        with tracebacks() as logged:
            for name, (vsn, frame) in UNREADABLE.items():
                closes[name] = await close_after(stack, vsn, frame)
            served = [await heartbeat(stack, vsn) for vsn in ("1.0.0", "2.0.0")]

    # THEN each such session ended with Realtime's close for a protocol error, saying why
    wrong = {name: close for name, close in closes.items() if not close or close[0] != 1002}
    assert wrong == {}
    assert all(reason for _, reason in filter(None, closes.values()))
    # AND nothing escaped as a traceback, and the endpoint serves the next client
    assert [r.getMessage() for r in logged.records] == []
    assert served == [{"status": "ok", "response": {}}] * 2


# Pushes a client library would not send, each readable: answered (or ignored), as Realtime does.
WRONG_SHAPES: list[tuple[str, Any]] = [
    ("phx_join", {"config": []}),
    ("phx_join", {"config": {"postgres_changes": "message"}}),
    ("phx_join", {"config": {"postgres_changes": [1, None, "x", {"event": 5, "table": []}]}}),
    ("phx_join", {"config": {"postgres_changes": [{"event": "*", "table": "message",
                                                   "schema": "public", "filter": 5}]}}),
    ("phx_join", {"config": {"postgres_changes": [{"event": "*", "table": {"a": 1},
                                                   "schema": ["public"]}]}}),
    ("phx_join", {"config": {"broadcast": {"self": {"x": 1}, "replay": 1}, "private": [1]}}),
    ("phx_join", {"config": {"presence": "yes", "private": "true"}}),
    ("phx_join", {"access_token": 42}),
    ("phx_join", {"access_token": {"a": 1}, "user_token": []}),
    ("phx_join", []),
    ("phx_join", "payload"),
    ("phx_join", None),
    ("phx_join", {"config": {"broadcast": {"self": True}}}),
    ("access_token", ["token"]),
    ("access_token", {"access_token": 7}),
    ("broadcast", {"event": 5, "payload": []}),
    ("broadcast", ["event"]),
    ("broadcast", {"type": "broadcast", "event": "e", "payload": "x"}),
    ("presence", 1),
    ("something", {}),
    ("phx_leave", 3),
]  # fmt: skip


async def test_pushes_of_the_wrong_shape_are_answered_and_the_socket_stays(
    logical_database_url: str,
) -> None:
    async with running_stack(logical_database_url) as stack, v2_socket(stack.origin) as socket:
        with tracebacks() as logged:
            for event, payload in WRONG_SHAPES:
                await socket.send("realtime:room", event, payload, join_ref="1")
                # A heartbeat after each: answered, so the socket and its session live on
                beat = await socket.send("phoenix", "heartbeat", {})
                alive = await socket.until("phx_reply", topic="phoenix")
                assert alive[1:] == (beat, "phoenix", "phx_reply", {"status": "ok", "response": {}})
    assert [r.getMessage() for r in logged.records] == []


async def test_a_broadcast_a_subscriber_cannot_take_is_dropped_for_it_alone(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    # Metadata of 247 bytes that JSON writes back longer (1E2 is 100.0): past a binary frame's
    # 255 bytes, had it been sent on.
    growing = ('{"k":[' + ",".join(["1E2"] * 60) + "]}").encode()
    assert len(growing) <= 255
    v1 = Inbox()
    async with (
        running_stack(url) as stack,
        supabase_client(stack.origin) as client,
        v2_socket(stack.origin) as sender,
        v2_socket(stack.origin) as receiver,
    ):
        # GIVEN a supabase-py subscriber (V1) and two supabase-js ones (V2) of a public room
        channel = client.channel("room", options(private=False))
        channel.on_broadcast("*", v1.callback("room"))
        assert await subscribed(channel) == SUBSCRIBED
        for socket in (sender, receiver):
            await socket.send("realtime:room", "phx_join", {"config": {}}, join_ref="9")
            assert (await socket.until("phx_reply"))[4]["status"] == "ok"
        # WHEN one V2 client broadcasts with that metadata
        await sender.ws.send(user_broadcast_push(b"realtime:room", b"grown", b"{}", meta=growing,
                                                 join_ref=b"9"))  # fmt: skip
        # AND the database broadcasts an event whose name a binary frame cannot hold, then
        # another
        long_event = "e" * 300
        for event in (long_event, "after"):
            await execute(url, "select realtime.send('{}'::jsonb, %s, 'room', false)", event)
        # THEN the other V2 client gets the first and the last, its channel kept in between
        frames: list[tuple[str | None, str | None, str, str, Any]] = []
        while not frames or frames[-1][4].get("event") != "after":
            frames.append(await receiver.receive())
        await v1.until(lambda items: len(items) == 3)

    assert [(f[3], f[4]) for f in frames] == [
        ("broadcast", {"type": "broadcast", "event": "grown", "payload": {}}),
        ("broadcast", {"type": "broadcast", "event": "after", "payload": ANY, "meta": ANY}),
    ]
    # AND the V1 client, whose frames hold any event, gets all three
    assert [b["event"] for b in v1.of("room")] == ["grown", long_event, "after"]


async def test_a_socket_holds_at_most_100_channels_as_realtime_allows(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with (
        running_stack(url) as stack,
        v2_socket(stack.origin) as greedy,
        supabase_client(stack.origin, token_for(user_id)) as client,
    ):
        # GIVEN a client that joined 100 channels, each bound to every change of every message
        binding = {"event": "*", "schema": "public", "table": "message"}
        join = {"config": {"postgres_changes": [binding]}, "access_token": token_for(user_id)}
        for n in range(100):
            await greedy.send(f"realtime:t{n}", "phx_join", join, join_ref=str(n))
            assert (await greedy.until("phx_reply", topic=f"realtime:t{n}"))[4]["status"] == "ok"
        # WHEN it joins one more
        await greedy.send("realtime:t100", "phx_join", join, join_ref="100")
        refused = await greedy.until("phx_reply", topic="realtime:t100")
        # AND joins one it holds again (Phoenix replaces it), and after leaving one, a new one
        await greedy.send("realtime:t0", "phx_join", join, join_ref="r0")
        again = await greedy.until("phx_reply", topic="realtime:t0")
        await greedy.send("realtime:t1", "phx_leave", {}, join_ref="1")
        await greedy.until("phx_close", topic="realtime:t1")
        await greedy.send("realtime:t101", "phx_join", join, join_ref="101")
        after_leave = await greedy.until("phx_reply", topic="realtime:t101")
        # AND another client, on a socket of its own, joins its chat's channel
        inbox = Inbox()
        other = await subscribed(chat_channel(client, chat_id, inbox), inbox)

    # THEN the 101st was refused in Realtime's words, and the rest went through
    assert refused[4] == {
        "status": "error",
        "response": {"reason": "ChannelRateLimitReached: Too many channels"},
    }
    assert (again[4]["status"], after_leave[4]["status"], other) == ("ok", "ok", SUBSCRIBED)
