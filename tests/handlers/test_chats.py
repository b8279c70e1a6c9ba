"""GET and POST /api/chats: a user lists and creates their own chats, and only theirs."""

from __future__ import annotations

import uuid

from tests.support import create_user_with_chat, fetch, in_process_app, token_for


async def test_a_created_chat_is_listed_first_and_only_for_its_owner(database_url: str) -> None:
    user_id, first_chat = await create_user_with_chat(database_url)
    other_user, other_chat = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        auth = {"Authorization": f"Bearer {token_for(user_id)}"}
        # WHEN the user creates a chat
        created = await stack.http.post("/api/chats", json={"title": "Trip plans"}, headers=auth)
        assert created.status_code == 201, created.text
        chat = created.json()
        # THEN it is theirs in the database
        [row] = await fetch(database_url, "select * from chat where id = %s", chat["id"])
        assert row["user_id"] == user_id
        assert (chat["title"], set(chat)) == (
            "Trip plans",
            {"id", "title", "createdAt", "updatedAt"},
        )
        # AND their list shows it first, then their older chat, and no one else's
        listed = await stack.http.get("/api/chats", headers=auth)
        assert listed.status_code == 200
        assert [c["id"] for c in listed.json()["chats"]] == [chat["id"], str(first_chat)]
        # AND the other user sees only their own
        theirs = await stack.http.get(
            "/api/chats", headers={"Authorization": f"Bearer {token_for(other_user)}"}
        )
        assert [c["id"] for c in theirs.json()["chats"]] == [str(other_chat)]
        # AND the new chat takes messages
        events = await stack.respond(token_for(user_id), {"chatId": chat["id"], "content": "hi"})
        assert events[-1][0] == "done"


async def test_a_chat_without_a_title_and_the_list_limit(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        auth = {"Authorization": f"Bearer {token_for(user_id)}"}
        untitled = await stack.http.post("/api/chats", headers=auth)
        assert untitled.status_code == 201
        assert untitled.json()["title"] == ""
        one = await stack.http.get("/api/chats", params={"limit": 1}, headers=auth)
        assert [c["id"] for c in one.json()["chats"]] == [untitled.json()["id"]]


async def test_bad_requests_get_json_errors_and_create_nothing(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        auth = {"Authorization": f"Bearer {token_for(user_id)}"}
        cases = [
            await stack.http.post("/api/chats", json={"title": "x" * 201}, headers=auth),
            await stack.http.post("/api/chats", json={"userId": str(uuid.uuid4())}, headers=auth),
            await stack.http.get("/api/chats", params={"limit": 0}, headers=auth),
        ]
        assert [(r.status_code, r.json()["error"]["code"]) for r in cases] == [
            (422, "invalid_request")
        ] * 3
        unauthenticated = await stack.http.post("/api/chats", json={})
        # A valid token whose user is not in auth.users cannot own a chat.
        stranger = await stack.http.post(
            "/api/chats", headers={"Authorization": f"Bearer {token_for(uuid.uuid4())}"}
        )
        assert [
            (r.status_code, r.json()["error"]["code"]) for r in (unauthenticated, stranger)
        ] == [(401, "unauthorized")] * 2
    assert len(await fetch(database_url, "select * from chat")) == 1


async def test_a_misspelt_query_parameter_is_refused_not_ignored(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url) as stack:
        auth = {"Authorization": f"Bearer {token_for(user_id)}"}
        response = await stack.http.get("/api/chats?limt=1", headers=auth)
        assert response.status_code == 422
        assert response.json() == {
            "error": {"code": "invalid_request", "message": "unknown query parameter 'limt'"}
        }
        # The parameter the route does take still works.
        assert (await stack.http.get("/api/chats?limit=1", headers=auth)).status_code == 200
