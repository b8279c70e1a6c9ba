"""Shared chats through the API: the owner adds and removes members, members read and send,
strangers and former members get nothing, only the person whose message started a turn answers
its prompts, and the limits and usage count the sender."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from demo.assistants import ASSISTANTS
from tests.api import Api, ok
from tests.support import create_user_with_chat, execute, fetch, in_process_app, token_for

DEFAULT = ASSISTANTS[0].id
ADD_USER_SQL = "insert into auth.users (id, email) values (%s, %s)"
SEED_REPLY_SQL = """
insert into public.message (id, chat_id, role, content, status, metadata)
values (%s, %s, 'assistant', 'so far', 'awaiting_approval',
        '{"pendingApproval": {"toolCallId": "call-1"}}'::jsonb)
"""
SEED_JOB_SQL = """
insert into public.job_runs
  (chat_id, root_message_id, status, kind, event_name, idempotency_key, payload, sender_id)
values (%s, %s, 'paused', 'handoff', 'chat/tool_handoff', %s, '{}', %s)
"""
CHAT_ROWS_SQL = """
select (select count(*) from public.message where chat_id = %s) as messages,
       (select count(*) from public.chat_member where chat_id = %s) as members
"""


async def new_user(database_url: str) -> tuple[uuid.UUID, str]:
    user_id = uuid.uuid4()
    email = f"Member-{user_id}@Test.example"
    await execute(database_url, ADD_USER_SQL, user_id, email)
    return user_id, email


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code, response.text


def say(chat_id: uuid.UUID, content: str = "hello") -> dict[str, Any]:
    """A message to the deployment's default assistant, named: in a shared chat a message that
    names nobody is posted to the chat only (tests/functions/test_shared_chats.py)."""
    return {"chatId": str(chat_id), "content": content, "assistantId": DEFAULT}


async def test_the_owner_adds_members_by_id_and_by_email(database_url: str) -> None:
    owner, chat = await create_user_with_chat(database_url)
    by_id, _ = await new_user(database_url)
    by_email, email = await new_user(database_url)
    async with in_process_app(database_url) as api:
        # WHEN the owner adds one user by id and another by e-mail (in another case)
        first = ok(await api.add_member(token_for(owner), chat, userId=str(by_id)), 201)
        second = ok(await api.add_member(token_for(owner), chat, email=email.lower()), 201)
        # THEN both are members, and the list shows the owner first
        assert (first["userId"], first["role"]) == (str(by_id), "member")
        assert (second["userId"], second["email"]) == (str(by_email), email)
        listed = await api.members(token_for(by_email), chat)
        assert [(m["userId"], m["role"]) for m in listed] == [
            (str(owner), "owner"),
            (str(by_id), "member"),
            (str(by_email), "member"),
        ]
        # AND adding them again, or the owner, changes nothing: 200 with the member
        again = await api.add_member(token_for(owner), chat, userId=str(by_id))
        assert ok(again, 200)["addedAt"] == first["addedAt"]
        assert ok(await api.add_member(token_for(owner), chat, userId=str(owner)))["role"] == (
            "owner"
        )
        # AND the chat is in each member's list of chats, as a member
        [shared] = await api.chats(token_for(by_id))
        assert (shared["id"], shared["role"]) == (str(chat), "member")
        [own] = await api.chats(token_for(owner))
        assert own["role"] == "owner"


async def test_an_unknown_user_and_a_chat_not_yours_get_the_same_answer(
    database_url: str,
) -> None:
    owner, chat = await create_user_with_chat(database_url)
    stranger, _ = await create_user_with_chat(database_url)
    member, _ = await new_user(database_url)
    async with in_process_app(database_url) as api:
        ok(await api.add_member(token_for(owner), chat, userId=str(member)), 201)
        answers = [
            # the owner adding a user who does not exist, by id and by e-mail
            await api.add_member(token_for(owner), chat, userId=str(uuid.uuid4())),
            await api.add_member(token_for(owner), chat, email="nobody@nowhere.example"),
            # a stranger adding a user who exists, to a chat not theirs; a member likewise
            await api.add_member(token_for(stranger), chat, userId=str(stranger)),
            await api.add_member(token_for(member), chat, userId=str(stranger)),
            # and to a chat that does not exist
            await api.add_member(token_for(owner), uuid.uuid4(), userId=str(member)),
        ]
    bodies = {(a.status_code, a.text) for a in answers}
    assert len(bodies) == 1, bodies
    assert_error(answers[0], 404, "chat_or_user_not_found")
    [row] = await fetch(database_url, CHAT_ROWS_SQL, chat, chat)
    assert row["members"] == 1


async def test_bad_bodies_and_too_many_members_store_nothing(database_url: str) -> None:
    owner, chat = await create_user_with_chat(database_url)
    users = [(await new_user(database_url))[0] for _ in range(3)]
    async with in_process_app(database_url, max_members_per_chat=2) as api:
        token = token_for(owner)
        for body in ({}, {"userId": str(users[0]), "email": "a@b.c"}, {"userId": "nope"}):
            assert_error(await api.add_member(token, chat, **body), 422, "invalid_request")
        ok(await api.add_member(token, chat, userId=str(users[0])), 201)
        ok(await api.add_member(token, chat, userId=str(users[1])), 201)
        # WHEN a third member is added past MAX_MEMBERS_PER_CHAT=2
        refused = await api.add_member(token, chat, userId=str(users[2]))
    # THEN 422, and they are not in the chat
    assert_error(refused, 422, "too_many_members")
    members = await fetch(database_url, "select user_id from chat_member where chat_id = %s", chat)
    assert {m["user_id"] for m in members} == set(users[:2])


async def test_members_send_and_read_strangers_do_not(database_url: str) -> None:
    owner, chat = await create_user_with_chat(database_url)
    member, _ = await new_user(database_url)
    stranger, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as api:
        ok(await api.add_member(token_for(owner), chat, userId=str(member)), 201)
        # WHEN the owner and the member each send a message
        owner_turn = await api.respond(token_for(owner), say(chat, "from the owner"))
        member_turn = await api.respond(token_for(member), say(chat, "from the member"))
        assert owner_turn[-1][0] == member_turn[-1][0] == "done"
        # THEN both read the whole chat, and each user message says who sent it
        for reader in (owner, member):
            messages = await api.messages(token_for(reader), chat)
            sent = [(m["content"], m["senderId"]) for m in messages if m["role"] == "user"]
            assert sent == [("from the owner", str(owner)), ("from the member", str(member))]
            assert all(m["senderId"] is None for m in messages if m["role"] == "assistant")
        # AND what the member's turn used is the member's, not the owner's
        usage = await fetch(
            database_url,
            "select user_id from reply_usage where message_id = %s",
            uuid.UUID(member_turn[0][1]["assistantMessageId"]),
        )
        assert [u["user_id"] for u in usage] == [member]
        # AND a stranger gets 404 for all of it, and stores nothing
        before = await fetch(database_url, CHAT_ROWS_SQL, chat, chat)
        stranger_token = token_for(stranger)
        assert_error(await api.history_response(stranger_token, chat), 404, "chat_not_found")
        assert_error(await api.members_response(stranger_token, chat), 404, "chat_not_found")
        assert_error(await api.respond_response(stranger_token, say(chat)), 404, "chat_not_found")
        assert await fetch(database_url, CHAT_ROWS_SQL, chat, chat) == before


async def test_a_removed_member_gets_nothing_new(database_url: str) -> None:
    owner, chat = await create_user_with_chat(database_url)
    member, _ = await new_user(database_url)
    leaver, _ = await new_user(database_url)
    async with in_process_app(database_url) as api:
        for user in (member, leaver):
            ok(await api.add_member(token_for(owner), chat, userId=str(user)), 201)
        token = token_for(member)  # issued while they were a member
        assert (await api.respond(token, say(chat)))[-1][0] == "done"
        # WHEN the owner removes one member, and the other leaves
        assert (await api.remove_member(token_for(owner), chat, member)).status_code == 204
        assert (await api.remove_member(token_for(leaver), chat, leaver)).status_code == 204
        # THEN the old token gets 404 everywhere in the chat, and can send nothing
        before = await fetch(database_url, CHAT_ROWS_SQL, chat, chat)
        for response in (
            await api.history_response(token, chat),
            await api.members_response(token, chat),
            await api.branches_response(token, chat),
            await api.chat_assistants_response(token, chat),
            await api.respond_response(token, say(chat)),
            await api.cancel(token, chat),
            await api.remove_member(token, chat, member),
        ):
            assert_error(response, 404, "chat_not_found")
        assert await api.chats(token) == []
        assert await api.chats(token_for(leaver)) == []
        assert await fetch(database_url, CHAT_ROWS_SQL, chat, chat) == before


async def test_membership_and_the_chat_are_the_owners(database_url: str) -> None:
    owner, chat = await create_user_with_chat(database_url)
    member, _ = await new_user(database_url)
    other, _ = await new_user(database_url)
    async with in_process_app(database_url) as api:
        for user in (member, other):
            ok(await api.add_member(token_for(owner), chat, userId=str(user)), 201)
        token = token_for(member)
        # a member removes no one else, nor the chat, nor its assistants
        assert_error(await api.remove_member(token, chat, other), 403, "not_chat_owner")
        assert_error(await api.remove_member(token, chat, owner), 403, "not_chat_owner")
        assert_error(await api.call("DELETE", f"/api/chats/{chat}", token), 403, "not_chat_owner")
        assert_error(await api.remove_assistant(token, chat, "default"), 403, "not_chat_owner")
        # the owner cannot be removed, even by themself; a non-member is not found
        assert_error(await api.remove_member(token_for(owner), chat, owner), 409, "owner_stays")
        assert_error(
            await api.remove_member(token_for(owner), chat, uuid.uuid4()), 404, "member_not_found"
        )
        # and the chat is still there, with both members
        assert len(await api.members(token, chat)) == 3


async def approve_as(api: Api, user: uuid.UUID, chat: uuid.UUID) -> httpx.Response:
    return await api.approve(token_for(user), chat, "call-1", approved=True)


async def test_only_the_turns_starter_approves_its_tool_call(database_url: str) -> None:
    # GIVEN a shared chat whose member's turn waits for a tool call's approval
    owner, chat = await create_user_with_chat(database_url)
    member, _ = await new_user(database_url)
    reply = uuid.uuid4()
    await execute(database_url, SEED_REPLY_SQL, reply, chat)
    await execute(database_url, SEED_JOB_SQL, chat, reply, str(uuid.uuid4()), member)
    async with in_process_app(database_url) as api:
        ok(await api.add_member(token_for(owner), chat, userId=str(member)), 201)
        # WHEN the owner approves it, THEN 403, and nothing is recorded
        assert_error(await approve_as(api, owner, chat), 403, "not_turn_starter")
        [row] = await fetch(database_url, "select metadata from message where id = %s", reply)
        assert "approvals" not in row["metadata"]
        # WHEN the member who started the turn approves it, THEN it is recorded
        assert (await approve_as(api, member, chat)).status_code == 202
        [row] = await fetch(database_url, "select metadata from message where id = %s", reply)
        assert row["metadata"]["approvals"]["call-1"]["approved"] is True


async def test_a_members_turns_count_against_the_member(database_url: str) -> None:
    # GIVEN a member whose turn in the owner's chat has not ended, with one active turn each
    owner, chat = await create_user_with_chat(database_url)
    member, member_chat = await create_user_with_chat(database_url)
    _, owner_other_chat = await create_user_with_chat(database_url)
    await execute(
        database_url, "update chat set user_id = %s where id = %s", owner, owner_other_chat
    )
    reply = uuid.uuid4()
    await execute(database_url, SEED_REPLY_SQL, reply, chat)
    await execute(database_url, SEED_JOB_SQL, chat, reply, str(uuid.uuid4()), member)
    async with in_process_app(database_url, max_active_turns_per_user=1) as api:
        ok(await api.add_member(token_for(owner), chat, userId=str(member)), 201)
        # WHEN each sends a message in a chat of their own
        refused = await api.respond_response(token_for(member), say(member_chat))
        passed = await api.respond(token_for(owner), say(owner_other_chat))
    # THEN the member is at their limit, and the owner is not
    assert_error(refused, 429, "too_many_active_turns")
    assert passed[-1][0] == "done"
