"""GET and POST /api/chats: a user lists and creates their own chats, and only theirs."""

from __future__ import annotations

import uuid

from tests.api import ok
from tests.support import create_user_with_chat, fetch, in_process_app, token_for


async def test_a_created_chat_is_listed_first_and_only_for_its_owner(database_url: str) -> None:
    user_id, first_chat = await create_user_with_chat(database_url)
    other_user, other_chat = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        token = token_for(user_id)
        # WHEN the user creates a chat
        created = await stack.create_chat(token, title="Trip plans")
        assert created.status_code == 201, created.text
        chat = created.json()
        # THEN it is theirs in the database
        [row] = await fetch(database_url, "select * from chat where id = %s", chat["id"])
        assert row["user_id"] == user_id
        assert (chat["title"], set(chat)) == (
            "Trip plans",
            {"id", "title", "createdAt", "updatedAt", "role"},
        )
        # AND their list shows it first, then their older chat, and no one else's
        listed = await stack.chats(token)
        assert [c["id"] for c in listed] == [chat["id"], str(first_chat)]
        # AND the other user sees only their own
        theirs = await stack.chats(token_for(other_user))
        assert [c["id"] for c in theirs] == [str(other_chat)]
        # AND the new chat takes messages
        events = await stack.respond(token, {"chatId": chat["id"], "content": "hi"})
        assert events[-1][0] == "done"


async def test_a_chat_without_a_title_and_the_list_limit(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        token = token_for(user_id)
        untitled = ok(await stack.create_chat(token), 201)
        assert untitled["title"] == ""
        one = await stack.chats(token, limit=1)
        assert [c["id"] for c in one] == [untitled["id"]]


async def test_bad_requests_get_json_errors_and_create_nothing(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        token = token_for(user_id)
        cases = [
            await stack.create_chat(token, title="x" * 201),
            await stack.create_chat(token, userId=str(uuid.uuid4())),
            await stack.chats_response(token, limit=0),
        ]
        assert [(r.status_code, r.json()["error"]["code"]) for r in cases] == [
            (422, "invalid_request")
        ] * 3
        unauthenticated = await stack.call("POST", "/api/chats", None, {})
        # A valid token whose user is not in auth.users cannot own a chat.
        stranger = await stack.create_chat(token_for(uuid.uuid4()))
        assert [
            (r.status_code, r.json()["error"]["code"]) for r in (unauthenticated, stranger)
        ] == [(401, "unauthorized")] * 2
    assert len(await fetch(database_url, "select * from chat")) == 1


async def test_a_misspelt_query_parameter_is_refused_not_ignored(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        token = token_for(user_id)
        response = await stack.chats_response(token, limt=1)
        assert response.status_code == 422
        assert response.json() == {
            "error": {"code": "invalid_request", "message": "unknown query parameter 'limt'"}
        }
        # The parameter the route does take still works.
        assert (await stack.chats_response(token, limit=1)).status_code == 200


async def test_deleting_a_chat_or_a_message_is_the_owners_alone(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    stranger, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        token = token_for(user_id)
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "hi"})
        assert events[-1][0] == "done"
        [message] = await fetch(
            database_url, "select id from message where chat_id = %s and role = 'user'", chat_id
        )
        message_path = f"/api/chat/{chat_id}/messages/{message['id']}"
        # WHEN a stranger tries either, THEN neither exists for them, and nothing goes
        for path in (message_path, f"/api/chats/{chat_id}"):
            refused = await stack.call("DELETE", path, token_for(stranger))
            assert refused.status_code == 404, refused.text
        assert (
            len(await fetch(database_url, "select id from message where chat_id = %s", chat_id))
            == 2
        )
        # WHEN the owner deletes their message, THEN it is gone, and a second time is a 404
        assert (await stack.call("DELETE", message_path, token)).status_code == 204
        again = await stack.call("DELETE", message_path, token)
        assert (again.status_code, again.json()["error"]["code"]) == (404, "message_not_found")
        # AND deleting the chat takes the rest with it
        assert (await stack.call("DELETE", f"/api/chats/{chat_id}", token)).status_code == 204
        assert await fetch(database_url, "select id from chat where id = %s", chat_id) == []
        assert await fetch(database_url, "select id from message where chat_id = %s", chat_id) == []
        gone = await stack.call("DELETE", f"/api/chats/{chat_id}", token)
        assert (gone.status_code, gone.json()["error"]["code"]) == (404, "chat_not_found")
