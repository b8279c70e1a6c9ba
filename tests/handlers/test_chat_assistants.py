"""The deployment's assistants and a chat's: GET /api/assistants, a chat created with its
assistants, adding and removing one, the default, and what another user and bad input get."""

from __future__ import annotations

import uuid

import pytest

from agent.assistants import Assistant, Assistants
from tests.api import ok
from tests.support import create_user_with_chat, fetch, in_process_app, token_for

# A deployment of three, none of them the demo's: the first is its default.
TEAM = Assistants(
    [
        Assistant(
            id="scribe",
            name="Scribe",
            description="Writes things down.",
            starters=["Take a note", "Read my notes back"],
        ),
        Assistant(id="critic", name="Critic", description="Finds the holes."),
        Assistant(id="planner", name="Planner"),
    ]
)
CHAT_ASSISTANTS_SQL = (
    "select assistant_id, is_default from chat_assistant where chat_id = %s order by added_at"
)


def listed(assistants: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(a["id"], a["isDefault"]) for a in assistants]


async def test_every_signed_in_user_lists_the_deployments_assistants(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url, assistants=TEAM) as api:
        assert await api.assistants(token_for(user_id)) == [
            {
                "id": "scribe",
                "name": "Scribe",
                "description": "Writes things down.",
                "starters": ["Take a note", "Read my notes back"],
            },
            {"id": "critic", "name": "Critic", "description": "Finds the holes.", "starters": []},
            {"id": "planner", "name": "Planner", "description": "", "starters": []},
        ]
        refused = await api.assistants_response(None)
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "unauthorized"


async def test_a_chat_created_with_its_assistants_and_its_default(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url, assistants=TEAM) as api:
        chat = ok(
            await api.create_chat(
                token, assistantIds=["critic", "planner"], defaultAssistantId="planner"
            ),
            201,
        )
        chat_id = uuid.UUID(chat["id"])
        assert listed(await api.chat_assistants(token, chat_id)) == [
            ("planner", True),
            ("critic", False),
        ]
        assert [
            (r["assistant_id"], r["is_default"])
            for r in await fetch(database_url, CHAT_ASSISTANTS_SQL, chat_id)
        ] == [("planner", True), ("critic", False)]

        # Only a list: its first is the default.
        only_list = ok(await api.create_chat(token, assistantIds=["critic"]), 201)
        assert listed(await api.chat_assistants(token, uuid.UUID(only_list["id"]))) == [
            ("critic", True)
        ]
        # Neither: the deployment's default alone, and nothing written down.
        plain = ok(await api.create_chat(token), 201)
        assert listed(await api.chat_assistants(token, uuid.UUID(plain["id"]))) == [
            ("scribe", True)
        ]
        assert await fetch(database_url, CHAT_ASSISTANTS_SQL, uuid.UUID(plain["id"])) == []


async def test_adding_making_default_and_removing_keep_one_default(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url, assistants=TEAM) as api:
        added = ok(await api.add_assistant(token, chat_id, assistantId="critic"))
        assert listed(added["assistants"]) == [("scribe", True), ("critic", False)]
        assert added["assistants"][1] == {
            "id": "critic",
            "name": "Critic",
            "description": "Finds the holes.",
            "starters": [],
            "isDefault": False,
        }
        again = ok(await api.add_assistant(token, chat_id, assistantId="critic", default=True))
        assert listed(again["assistants"]) == [("scribe", False), ("critic", True)]

        removed = ok(await api.remove_assistant(token, chat_id, "critic"))
        # The default passed to the earliest added of the others.
        assert listed(removed["assistants"]) == [("scribe", True)]
        assert listed(await api.chat_assistants(token, chat_id)) == [("scribe", True)]

        last = await api.remove_assistant(token, chat_id, "scribe")
        assert (last.status_code, last.json()["error"]["code"]) == (409, "last_assistant")
        absent = await api.remove_assistant(token, chat_id, "planner")
        assert (absent.status_code, absent.json()["error"]["code"]) == (
            409,
            "assistant_not_in_chat",
        )
        # One it does not have is not to be added first: there is nothing to remove.
        assert absent.json()["error"]["message"] == (
            "This assistant is not in this chat, so there is nothing to remove."
        )


def _codes(response_status: int, body: dict[str, dict[str, str]]) -> tuple[int, str]:
    return response_status, body["error"]["code"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"assistantId": "nobody"}, 404, "assistant_not_found"),
        ({"assistantId": "no spaces"}, 422, "invalid_request"),
        ({"assistantId": "critic\u0000"}, 422, "invalid_request"),
        ({"assistantId": "critic", "extra": 1}, 422, "invalid_request"),
        ({}, 422, "invalid_request"),
    ],
)
async def test_bad_additions_change_nothing(
    database_url: str, body: dict[str, object], status: int, code: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with in_process_app(database_url, assistants=TEAM) as api:
        refused = await api.add_assistant(token_for(user_id), chat_id, **body)
        assert _codes(refused.status_code, refused.json()) == (status, code)
    assert await fetch(database_url, CHAT_ASSISTANTS_SQL, chat_id) == []


async def test_a_chat_with_an_unknown_assistant_is_not_created(database_url: str) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url, assistants=TEAM) as api:
        token = token_for(user_id)
        refused = await api.create_chat(token, assistantIds=["critic", "nobody"])
        assert _codes(refused.status_code, refused.json()) == (404, "assistant_not_found")
        refused = await api.create_chat(token, defaultAssistantId="nobody")
        assert _codes(refused.status_code, refused.json()) == (404, "assistant_not_found")
        assert len(await api.chats(token)) == 1  # the one it had


async def test_another_users_chat_is_not_found_whatever_they_try(database_url: str) -> None:
    _, chat_id = await create_user_with_chat(database_url)
    stranger, _ = await create_user_with_chat(database_url)
    async with in_process_app(database_url, assistants=TEAM) as api:
        token = token_for(stranger)
        tries = [
            await api.chat_assistants_response(token, chat_id),
            await api.add_assistant(token, chat_id, assistantId="critic"),
            await api.remove_assistant(token, chat_id, "scribe"),
        ]
        for response in tries:
            assert _codes(response.status_code, response.json()) == (404, "chat_not_found")
    assert await fetch(database_url, CHAT_ASSISTANTS_SQL, chat_id) == []


async def test_an_assistant_the_code_no_longer_defines_is_left_out(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url, assistants=TEAM) as api:
        ok(await api.add_assistant(token, chat_id, assistantId="planner"))
    # A later deployment without the planner.
    fewer = Assistants([a for a in TEAM if a.id != "planner"])
    async with in_process_app(database_url, assistants=fewer) as api:
        assert listed(await api.chat_assistants(token, chat_id)) == [("scribe", True)]
