"""The dev server's Supabase Realtime endpoint, through the clients a frontend uses: supabase-py's
realtime client (V1 protocol) and the V2 protocol supabase-js speaks."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from itertools import pairwise
from typing import Any

import pytest
from realtime import RealtimeSubscribeStates
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.realtime_clients import (
    ALL,
    Inbox,
    anon_key,
    chat_channel,
    options,
    subscribed,
    supabase_client,
    v2_socket,
)
from tests.support import (
    create_user_with_chat,
    execute,
    fetch,
    insert_message,
    running_stack,
    token_for,
)

SUBSCRIBED = RealtimeSubscribeStates.SUBSCRIBED
CHANNEL_ERROR = RealtimeSubscribeStates.CHANNEL_ERROR


def record(payload: dict[str, Any]) -> dict[str, Any]:
    new: dict[str, Any] = payload["data"]["record"]
    return new


def completed(reply_id: str) -> Any:
    def found(items: list[tuple[str, Any]]) -> bool:
        return any(
            kind == "message" and record(p)["id"] == reply_id and record(p)["status"] == "completed"
            for kind, p in items
        )

    return found


def short_token(user_id: uuid.UUID, seconds: int) -> str:
    return token_for(user_id, exp=int(time.time()) + seconds)


async def test_a_turn_reaches_supabase_py_in_commit_order(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    inbox = Inbox()
    async with (
        running_stack(url, scripted_token_delay_ms=5) as stack,
        supabase_client(stack.origin, token_for(user_id)) as client,
    ):
        # GIVEN the chat's channel, joined as a frontend joins it, with the user's token
        channel = chat_channel(client, chat_id, inbox)
        assert await subscribed(channel, inbox) == SUBSCRIBED
        await inbox.until(lambda items: any(kind == "system" for kind, _ in items))
        # WHEN a message hands a tool call off to the background, which answers
        sent = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/report 0.3"}
        )
        reply_id = sent[0][1]["assistantMessageId"]
        await inbox.until(completed(reply_id))

    # THEN the join was answered with the bindings' ids and Realtime's system message
    [system] = inbox.of("system")
    assert (system.extension, system.status, system.message) == (
        "postgres_changes", "ok", "Subscribed to PostgreSQL",
    )  # fmt: skip
    bindings = {c.table: c.id for c in channel.postgres_changes_callbacks}
    assert all(isinstance(i, int) for i in bindings.values())
    changes = [(kind, p) for kind, p in inbox.items if kind in ("message", "message_draft")]
    # AND every change arrived in Realtime's payload, with the id of the binding it matched
    for kind, payload in changes:
        data = payload["data"]
        assert payload["ids"] == [bindings[kind]]
        assert (data["schema"], data["table"]) == ("public", kind)
        assert data["type"] in ("INSERT", "UPDATE")
        assert data["commit_timestamp"].endswith("Z")
        assert data["errors"] is None
        assert {c["name"] for c in data["columns"]} >= set(data["record"])
        assert data["record"]["chat_id"] == str(chat_id)
        if data["type"] == "UPDATE":
            assert set(data["old_record"]) == {"id" if kind == "message" else "message_id"}
    # AND in commit order: the user's message, the reply streaming, queued for the background,
    # streaming there, its drafts growing, completed
    times = [p["data"]["commit_timestamp"] for _, p in changes]
    assert times == sorted(times)
    replies = [
        record(p) for kind, p in changes if kind == "message" and record(p)["id"] == reply_id
    ]
    statuses = [r["status"] for r in replies]
    assert statuses[0] == "streaming"
    assert statuses[-1] == "completed"
    assert "queued" in statuses
    assert statuses.index("queued") < len(statuses) - 1 - statuses[::-1].index("streaming")
    drafts = [record(p) for kind, p in changes if kind == "message_draft"]
    assert len(drafts) >= 2
    assert [d["seq"] for d in drafts] == sorted(d["seq"] for d in drafts)
    assert all(b["draft_content"].startswith(a["draft_content"]) for a, b in pairwise(drafts))
    assert replies[-1]["content"].startswith(drafts[-1]["draft_content"])
    first = changes[0][1]["data"]
    assert (first["type"], first["record"]["role"]) == ("INSERT", "user")
    assert record(changes[-1][1])["status"] == "completed"


async def test_nothing_of_another_users_chat_reaches_a_subscriber(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    alice, alices_chat = await create_user_with_chat(url)
    bob, bobs_chat = await create_user_with_chat(url)
    inbox = Inbox()
    async with (
        running_stack(url) as stack,
        supabase_client(stack.origin, token_for(alice)) as client,
    ):
        # GIVEN Alice subscribed to every message (no filter) and to Bob's chat by its id
        everything = client.channel("everything")
        everything.on_postgres_changes(
            ALL, inbox.callback("message"), table="message", schema="public"
        )
        assert await subscribed(everything) == SUBSCRIBED
        bobs = client.channel(f"bobs:{bobs_chat}")
        bobs.on_postgres_changes(
            ALL, inbox.callback("message"), table="message", schema="public",
            filter=f"chat_id=eq.{bobs_chat}",
        )  # fmt: skip
        assert await subscribed(bobs) == SUBSCRIBED
        # WHEN Bob's chat runs a turn, and then Alice's chat changes
        await stack.respond(token_for(bob), {"chatId": str(bobs_chat), "content": "/calc 2*3"})
        await stack.executor.wait_idle(timeout=30)
        await insert_message(url, alices_chat, "for alice")
        await inbox.until(lambda items: bool(items))
        await asyncio.sleep(0.3)  # anything else on its way arrives meanwhile
        # AND Alice tries to join Bob's private channel
        private = Inbox()
        refused = await subscribed(
            client.channel(f"chat:{bobs_chat}", options(private=True)), private
        )

    # THEN the only change she got is her own chat's (changes come in commit order, so one of
    # Bob's would have come first)
    assert [record(p)["content"] for p in inbox.of("message")] == ["for alice"]
    # AND she may not join his private channel
    assert refused == CHANNEL_ERROR
    [(_, reason)] = private.of("state")
    assert json.loads(reason or "{}") == {
        "reason": "Unauthorized: You do not have permissions to read from this Channel topic:"
        f" chat:{bobs_chat}"
    }


async def test_a_refreshed_token_keeps_the_channel_and_an_expired_one_ends_it(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    kept, ended = Inbox(), Inbox()
    async with (
        running_stack(url) as stack,
        supabase_client(stack.origin, short_token(user_id, 3)) as refreshing,
        supabase_client(stack.origin, short_token(user_id, 3)) as expiring,
    ):
        # GIVEN two clients joined with tokens that expire in 3 s
        assert await subscribed(chat_channel(refreshing, chat_id, kept), kept) == SUBSCRIBED
        assert await subscribed(chat_channel(expiring, chat_id, ended), ended) == SUBSCRIBED
        # WHEN one refreshes its token before then (supabase-py sends `access_token`)
        await refreshing.realtime.set_auth(token_for(user_id))
        # AND the other does not: at its token's expiry its channel ends
        closed = RealtimeSubscribeStates.CLOSED
        await ended.until(lambda items: any(k == "state" and i[0] == closed for k, i in items))
        # THEN the refreshed one still receives what is written after the first token expired
        await insert_message(url, chat_id, "after expiry")
        await kept.until(lambda items: any(k == "message" for k, _ in items))
        # AND the expired client recovers once it has a fresh token: it joins again
        await expiring.realtime.set_auth(token_for(user_id))
        again = Inbox()
        assert await subscribed(chat_channel(expiring, chat_id, again), again) == SUBSCRIBED
        await insert_message(url, chat_id, "after recovery")
        await again.until(lambda items: any(k == "message" for k, _ in items))
        await kept.until(lambda items: sum(k == "message" for k, _ in items) == 2)

    assert [record(p)["content"] for p in kept.of("message")] == ["after expiry", "after recovery"]
    assert [record(p)["content"] for p in again.of("message")] == ["after recovery"]
    # AND the expired one was told why (a `system` error), then closed
    [_, (error, why), (end, _)] = ended.of("state")
    assert (error, end) == (CHANNEL_ERROR, RealtimeSubscribeStates.CLOSED)
    told = json.loads(why or "{}")
    assert (told["extension"], told["status"]) == ("system", "error")
    assert told["message"].startswith("Token has expired ")
    assert ended.of("message") == []


async def test_joins_and_bindings_realtime_refuses_are_told_why(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    async with running_stack(url) as stack:
        # A handshake without a valid key is refused, as Realtime refuses it
        ws_url = stack.origin.replace("http://", "ws://") + "/realtime/v1/websocket"
        with pytest.raises(InvalidStatus) as refused:
            async with connect(f"{ws_url}?apikey=not-a-jwt&vsn=1.0.0"):
                pass
        assert refused.value.response.status_code == 401
        assert json.loads(refused.value.response.body or b"{}") == {
            "error": "The token provided is not a valid JWT"
        }
        reasons: dict[str, Any] = {}
        for name, token in [
            ("malformed", "not-a-jwt"),
            ("expired", short_token(user_id, -10)),
            ("foreign", token_for(user_id, secret="another-secret-" + "y" * 32)),
        ]:
            inbox = Inbox()
            async with supabase_client(stack.origin, token) as client:
                channel = client.channel(f"chat:{chat_id}")
                assert await subscribed(channel, inbox) == CHANNEL_ERROR
            reasons[name] = json.loads(inbox.of("state")[0][1])["reason"]
        # Bindings: a table outside the publication, a column that does not exist, a value of
        # the wrong type, an operator Realtime does not know
        systems: dict[str, str] = {}
        async with supabase_client(stack.origin, token_for(user_id)) as client:
            for name, table, filter_ in [
                ("table", "job_runs", None),
                ("column", "message", "nope=eq.1"),
                ("value", "message", "chat_id=eq.not-a-uuid"),
                ("operator", "message", "chat_id=foo.1"),
            ]:
                inbox = Inbox()
                channel = client.channel(f"bad-{name}")
                channel.on_postgres_changes(
                    ALL, inbox.callback("message"), table=table, schema="public", filter=filter_
                )
                channel.on_system(inbox.callback("system"))
                await subscribed(channel, inbox)
                await inbox.until(
                    lambda items: any(k == "state" and i[0] == CHANNEL_ERROR for k, i in items)
                )
                systems[name] = json.loads(inbox.of("state")[-1][1])["message"]
                await client.remove_channel(channel)

    assert reasons["malformed"] == "MalformedJWT: The token provided is not a valid JWT"
    assert reasons["expired"].startswith("InvalidJWTToken: Token has expired ")
    assert reasons["foreign"] == "JwtSignatureError: Failed to validate JWT signature"
    assert systems["table"].startswith(
        "Unable to subscribe to changes with given parameters. Please check Realtime is enabled"
    )
    assert systems["column"].endswith("Exception: invalid column for filter nope")
    assert 'invalid input syntax for type uuid: "not-a-uuid"' in systems["value"]
    assert systems["operator"] == 'Error parsing `filter` params: ["foo", "1"]'


async def test_drafts_over_broadcast_reach_the_chats_private_channel(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    inbox = Inbox()
    async with (
        running_stack(url, scripted_token_delay_ms=5, draft_transport="broadcast") as stack,
        supabase_client(stack.origin, token_for(user_id)) as client,
    ):
        channel = chat_channel(client, chat_id, inbox)
        assert await subscribed(channel, inbox) == SUBSCRIBED
        sent = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/report 0.3"}
        )
        reply_id = sent[0][1]["assistantMessageId"]
        await inbox.until(completed(reply_id))

    # THEN the drafts came as broadcasts, none as message_draft rows
    assert inbox.of("message_draft") == []
    drafts = [b for b in inbox.of("draft") if b["payload"]["messageId"] == reply_id]
    assert len(drafts) >= 3
    assert all(b["event"] == "draft" and uuid.UUID(b["meta"]["id"]) for b in drafts)
    # AND following them as a frontend would (each continues the draft of seq `after`, or,
    # `after` null, is the whole draft) rebuilds the text the reply completed with
    shown, seq = "", 0
    for broadcast in drafts:
        draft = broadcast["payload"]
        assert draft["seq"] > seq
        if draft["after"] is None:
            shown = draft["text"]
        else:
            assert draft["after"] == seq
            shown += draft["text"]
        seq = draft["seq"]
    [final] = [
        record(p)
        for p in inbox.of("message")
        if record(p)["id"] == reply_id and record(p)["status"] == "completed"
    ]
    assert shown == final["content"]
    # AND the whole drafts are not sent again and again: together, the broadcasts carry the
    # text about once
    assert sum(len(b["payload"]["text"]) for b in drafts) < 2 * len(final["content"])
    assert await fetch(url, "select * from public.broadcast_draft") == []


async def test_broadcasts_between_clients_on_public_and_private_channels(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    sender_inbox, receiver_inbox = Inbox(), Inbox()
    async with (
        running_stack(url) as stack,
        supabase_client(stack.origin, token_for(user_id)) as sender,
        supabase_client(stack.origin, token_for(user_id)) as receiver,
    ):
        rooms = []
        for client, inbox in ((sender, sender_inbox), (receiver, receiver_inbox)):
            for topic, private in (("room", False), (f"chat:{chat_id}", True)):
                channel = client.channel(topic, options(private=private))
                channel.on_broadcast("*", inbox.callback(topic.split(":")[0]))
                assert await subscribed(channel) == SUBSCRIBED
                rooms.append(channel)
        # WHEN the sender broadcasts on the public room and on the chat's private channel
        await rooms[0].send_broadcast("hello", {"n": 1})
        await rooms[1].send_broadcast("hello", {"n": 2})
        # AND the database broadcasts on the private channel
        await execute(
            url, "select realtime.send('{\"n\": 3}'::jsonb, 'note', %s, true)", f"chat:{chat_id}"
        )
        await receiver_inbox.until(lambda items: len(items) >= 2)
        await sender_inbox.until(lambda items: len(items) >= 1)
        await asyncio.sleep(0.3)  # anything else on its way arrives meanwhile

    # THEN the other subscriber of the public room gets the public broadcast, not the sender
    # (no `self`); nobody may send on the private channel (no insert policy), but what the
    # database sends there arrives, with its row's id
    assert [(b["event"], b["payload"]) for b in receiver_inbox.of("room")] == [("hello", {"n": 1})]
    [note] = receiver_inbox.of("chat")
    assert (note["event"], note["payload"]["n"]) == ("note", 3)
    assert uuid.UUID(note["meta"]["id"])
    assert sender_inbox.of("room") == []
    assert [b["event"] for b in sender_inbox.of("chat")] == ["note"]


async def test_the_v2_protocol_of_supabase_js(logical_database_url: str) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    topic = f"realtime:chat:{chat_id}"
    binding = {
        "event": "*",
        "schema": "public",
        "table": "message",
        "filter": f"chat_id=eq.{chat_id}",
    }
    async with (
        running_stack(url) as stack,
        v2_socket(stack.origin) as socket,
        v2_socket(stack.origin) as other,
    ):
        # A join: the array frame, answered with the binding's id, then the system message
        join = {
            "config": {"private": True, "postgres_changes": [binding]},
            "access_token": token_for(user_id),
        }
        ref = await socket.send(topic, "phx_join", join, join_ref="1")
        join_ref, reply_ref, reply_topic, event, reply = await socket.receive()
        assert (join_ref, reply_ref, reply_topic, event, reply["status"]) == (
            "1",
            ref,
            topic,
            "phx_reply",
            "ok",
        )
        [answered] = reply["response"]["postgres_changes"]
        assert answered == {**binding, "id": answered["id"]}
        system = await socket.until("system")
        assert system[4] == {
            "extension": "postgres_changes", "status": "ok",
            "message": "Subscribed to PostgreSQL", "channel": f"chat:{chat_id}",
        }  # fmt: skip
        # A heartbeat
        ref = await socket.send("phoenix", "heartbeat", {})
        assert await socket.receive() == (
            None,
            ref,
            "phoenix",
            "phx_reply",
            {"status": "ok", "response": {}},
        )
        # A change: `[null, null, topic, "postgres_changes", {ids, data}]`
        await insert_message(url, chat_id, "v2")
        _, _, _, _, change = await socket.until("postgres_changes")
        assert change["ids"] == [answered["id"]]
        assert change["data"]["record"]["content"] == "v2"
        # A broadcast from the database: a binary user broadcast (kind 4), meta with its id
        await execute(
            url, "select realtime.send('{\"n\": 1}'::jsonb, 'note', %s, true)", f"chat:{chat_id}"
        )
        _, _, b_topic, b_event, broadcast = await socket.until("broadcast")
        assert (b_topic, b_event, broadcast["event"], broadcast["payload"]["n"]) == (
            topic,
            "broadcast",
            "note",
            1,
        )
        assert uuid.UUID(broadcast["meta"]["id"])
        # A client's broadcast on a public channel, pushed as realtime-js pushes it (binary,
        # kind 3), reaches the other subscriber as a binary user broadcast
        room = "realtime:room"
        for s in (socket, other):
            await s.send(room, "phx_join", {"config": {"broadcast": {"self": False}}}, join_ref="9")
            assert (await s.until("phx_reply", topic=room))[4]["status"] == "ok"
        await socket.send_user_broadcast(room, "hi", {"x": 1}, join_ref="9")
        _, _, r_topic, _, received = await other.until("broadcast", topic=room)
        assert (r_topic, received) == (
            room,
            {"type": "broadcast", "event": "hi", "payload": {"x": 1}},
        )
        # A leave: answered, then the channel's close
        ref = await socket.send(topic, "phx_leave", {}, join_ref="1")
        assert await socket.until("phx_reply", topic=topic) == (
            "1",
            ref,
            topic,
            "phx_reply",
            {"status": "ok", "response": {}},
        )
        assert await socket.until("phx_close", topic=topic) == ("1", "1", topic, "phx_close", {})
        # A message for a topic no longer joined
        ref = await socket.send(topic, "access_token", {"access_token": token_for(user_id)})
        assert (await socket.until("phx_reply", topic=topic))[4] == {
            "status": "error",
            "response": {"reason": "unmatched topic"},
        }


async def test_without_logical_decoding_a_binding_is_told_the_fix(
    replica_database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(replica_database_url)
    inbox = Inbox()
    async with (
        running_stack(replica_database_url) as stack,
        supabase_client(stack.origin, token_for(user_id)) as client,
    ):
        channel = chat_channel(client, chat_id, inbox)
        await subscribed(channel, inbox)
        await inbox.until(
            lambda items: any(k == "state" and i[0] == CHANNEL_ERROR for k, i in items)
        )
    message = json.loads(inbox.of("state")[-1][1])["message"]
    assert "ALTER SYSTEM SET wal_level = logical" in message


async def test_anon_key_alone_sees_no_rows(logical_database_url: str) -> None:
    # The socket's key is the token when a join has none: anon, whose RLS shows no chat's rows.
    url = logical_database_url
    _, chat_id = await create_user_with_chat(url)
    inbox = Inbox()
    async with running_stack(url) as stack, supabase_client(stack.origin) as client:
        channel = client.channel("anon")
        channel.on_postgres_changes(
            ALL, inbox.callback("message"), table="message", schema="public"
        )
        assert await subscribed(channel) == SUBSCRIBED
        await insert_message(url, chat_id, "private")
        await asyncio.sleep(0.5)
    assert inbox.of("message") == []
    assert anon_key()  # (the key the client connected with)


async def test_filters_and_unchanged_large_values_as_realtime_has_them(
    logical_database_url: str,
) -> None:
    url = logical_database_url
    user_id, chat_id = await create_user_with_chat(url)
    inbox = Inbox()
    async with (
        running_stack(url) as stack,
        supabase_client(stack.origin, token_for(user_id)) as client,
    ):
        channel = client.channel("filters")
        for name, filter_ in [
            ("in", "role=in.(assistant,tool)"),
            ("not", "role=not.eq.assistant"),
            ("both", f"chat_id=eq.{chat_id},status=neq.streaming"),
        ]:
            channel.on_postgres_changes(
                ALL, inbox.callback(name), table="message", schema="public", filter=filter_
            )
        assert await subscribed(channel) == SUBSCRIBED
        # WHEN a user message and a streaming reply with a long answer are written, and the
        # reply's status changes while its content (stored out of line) does not
        content = secrets.token_hex(8000)  # random: it does not compress, so it is TOASTed
        await execute(
            url,
            "insert into public.message (chat_id, role, content) values (%s, 'user', 'hi')",
            chat_id,
        )
        reply_id = await insert_message(url, chat_id, content)
        await execute(url, "update public.message set status = 'completed' where id = %s", reply_id)
        await inbox.until(lambda items: sum(k == "in" for k, _ in items) == 2)
        await inbox.until(lambda items: sum(k == "both" for k, _ in items) == 2)
        await asyncio.sleep(0.3)

    def seen(name: str) -> list[tuple[str, str, str]]:
        return [(p["data"]["type"], record(p)["role"], record(p)["status"]) for p in inbox.of(name)]

    # THEN each binding got what its filter lets through, and nothing else
    assert seen("in") == [
        ("INSERT", "assistant", "streaming"),
        ("UPDATE", "assistant", "completed"),
    ]
    assert seen("not") == [("INSERT", "user", "completed")]
    assert seen("both") == [("INSERT", "user", "completed"), ("UPDATE", "assistant", "completed")]
    # AND the update leaves out the content it did not change: it is not in the WAL
    inserted, updated = inbox.of("in")
    assert record(inserted)["content"] == content
    assert "content" not in record(updated)
    assert any(c["name"] == "content" for c in updated["data"]["columns"])
