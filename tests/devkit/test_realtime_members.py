"""A shared chat's Realtime channel: a member follows it like the owner, and once removed gets
nothing more on the subscription they hold, rows and broadcasts alike, as Supabase re-checks
RLS per change."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from realtime import RealtimeSubscribeStates

from demo.assistants import ASSISTANTS
from tests.api import ok
from tests.realtime_clients import Inbox, chat_channel, subscribed, supabase_client
from tests.support import create_user_with_chat, execute, running_stack, token_for

# Streams for a while, so that drafts are broadcast as it goes.
# Named: in a shared chat a message that names no assistant is posted to the chat only.
DEFAULT = ASSISTANTS[0].id
LONG = " ".join(f"word{n}" for n in range(30))


def reply_ids(items: list[tuple[str, Any]]) -> set[str]:
    """The messages and drafts that reached the subscriber, by message id."""
    ids = set()
    for kind, payload in items:
        if kind == "message":
            ids.add(payload["data"]["record"]["id"])
        elif kind == "draft":
            ids.add(payload["payload"]["messageId"])
    return ids


def completed(reply_id: str) -> Any:
    def found(items: list[tuple[str, Any]]) -> bool:
        return any(
            kind == "message"
            and p["data"]["record"]["id"] == reply_id
            and p["data"]["record"]["status"] == "completed"
            for kind, p in items
        )

    return found


async def test_a_removed_member_receives_nothing_more(logical_database_url: str) -> None:
    url = logical_database_url
    owner, chat = await create_user_with_chat(url)
    member = uuid.uuid4()
    await execute(url, "insert into auth.users (id, email) values (%s, %s)", member, "m@test")
    inbox = Inbox()
    async with (
        running_stack(url, scripted_token_delay_ms=20, draft_transport="broadcast") as stack,
        supabase_client(stack.origin, token_for(member)) as client,
    ):
        # GIVEN a member subscribed to the chat's private channel, who sees the owner's turn
        ok(await stack.add_member(token_for(owner), chat, userId=str(member)), 201)
        channel = chat_channel(client, chat, inbox)
        assert await subscribed(channel, inbox) == RealtimeSubscribeStates.SUBSCRIBED
        first = await stack.respond(
            token_for(owner), {"chatId": str(chat), "content": LONG, "assistantId": DEFAULT}
        )
        first_reply = first[0][1]["assistantMessageId"]
        await inbox.until(completed(first_reply))
        assert any(
            kind == "draft" and p["payload"]["messageId"] == first_reply for kind, p in inbox.items
        )

        # WHEN the owner removes them, and runs another turn
        assert (await stack.remove_member(token_for(owner), chat, member)).status_code == 204
        seen_before = len(inbox.items)
        second = await stack.respond(
            token_for(owner), {"chatId": str(chat), "content": LONG, "assistantId": DEFAULT}
        )
        assert second[-1][0] == "done"
        await asyncio.sleep(1.0)  # anything on its way arrives meanwhile

    # THEN nothing of the second turn reached them: no message row, no draft
    later = inbox.items[seen_before:]
    second_ids = {second[0][1]["userMessageId"], second[0][1]["assistantMessageId"]}
    assert not reply_ids(later) & second_ids, later
    # AND their channel ended in an error that says why
    errors = [p for kind, p in later if kind == "state" and p[0].name == "CHANNEL_ERROR"]
    assert any("no longer may read" in str(reason) for _, reason in errors), later


def stored(message_id: str, status: str = "completed") -> Any:
    """Whether a row change of the message, in `status`, has arrived."""

    def found(items: list[tuple[str, Any]]) -> bool:
        return any(
            kind == "message"
            and p["data"]["record"]["id"] == message_id
            and p["data"]["record"]["status"] == status
            for kind, p in items
        )

    return found


async def test_two_people_and_two_assistants_follow_one_chat(logical_database_url: str) -> None:
    url = logical_database_url
    both = [a.id for a in ASSISTANTS[:2]]
    owner, chat = await create_user_with_chat(url, assistants=both)
    member = uuid.uuid4()
    await execute(url, "insert into auth.users (id, email) values (%s, %s)", member, "m2@test")
    owner_inbox, member_inbox = Inbox(), Inbox()
    async with (
        running_stack(url, scripted_token_delay_ms=5) as stack,
        supabase_client(stack.origin, token_for(owner)) as owner_client,
        supabase_client(stack.origin, token_for(member)) as member_client,
    ):
        ok(await stack.add_member(token_for(owner), chat, userId=str(member)), 201)
        for client, inbox in ((owner_client, owner_inbox), (member_client, member_inbox)):
            channel = chat_channel(client, chat, inbox)
            assert await subscribed(channel, inbox) == RealtimeSubscribeStates.SUBSCRIBED
        # WHEN the member greets everyone, then each person asks a different assistant
        hello = await stack.respond(
            token_for(member), {"chatId": str(chat), "content": "Hello everyone"}
        )
        first, second = (f"@{a.name} what was said?" for a in ASSISTANTS[:2])
        asked = await stack.respond(token_for(member), {"chatId": str(chat), "content": first})
        answered = await stack.respond(token_for(owner), {"chatId": str(chat), "content": second})
        await stack.executor.wait_idle()
        posted = hello[0][1]["userMessageId"]
        replies = [asked[0][1]["assistantMessageId"], answered[0][1]["assistantMessageId"]]
        # THEN both people see, live, the greeting with its sender and both completed replies
        for inbox in (owner_inbox, member_inbox):
            await inbox.until(stored(posted))
            for reply in replies:
                await inbox.until(stored(reply))
        greeting = next(
            p["data"]["record"]
            for kind, p in member_inbox.items
            if kind == "message" and p["data"]["record"]["id"] == posted
        )
        assert (greeting["sender_id"], greeting["assistant_id"]) == (str(member), "")
        # AND each reply is its assistant's, in the turn of whoever asked
        authors = {
            p["data"]["record"]["id"]: p["data"]["record"]["assistant_id"]
            for kind, p in owner_inbox.items
            if kind == "message"
        }
        assert [authors[r] for r in replies] == both
