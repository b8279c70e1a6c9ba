"""The history of a chat two assistants answer: without `assistantId`, the whole chat, each
assistant's active branch merged in chat order, every message saying its assistant; with it,
that assistant's thread alone."""

from __future__ import annotations

import uuid
from typing import Any

from agent.assistants import Assistant, Assistants
from tests.api import Api, ok
from tests.support import create_user_with_chat, in_process_app, token_for

TEAM = Assistants(
    [
        Assistant(id="scribe", name="Scribe", description="Writes things down."),
        Assistant(id="critic", name="Critic", description="Finds the holes."),
    ]
)


async def say(api: Api, token: str, chat_id: uuid.UUID, content: str, to: str) -> dict[str, Any]:
    """One turn for `to`, read to its end; its metadata."""
    events = await api.respond(
        token, {"chatId": str(chat_id), "content": content, "assistantId": to}
    )
    assert events[-1][0] == "done", events
    metadata: dict[str, Any] = events[0][1]
    return metadata


def shown(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(m["assistantId"], m["role"], m["content"]) for m in messages]


async def test_the_history_of_a_chat_is_every_assistants_active_branch_in_chat_order(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url, assistants=TEAM) as api:
        # GIVEN a chat of both assistants, the scribe its default, each answering in turn
        ok(await api.add_assistant(token, chat_id, assistantId="critic"))
        await say(api, token, chat_id, "one", to="scribe")
        two = await say(api, token, chat_id, "two", to="critic")
        await say(api, token, chat_id, "three", to="scribe")

        # WHEN the page reads the chat's history, THEN every message is there once, in the order
        # it was written, each with its assistant (a user message: the one it was addressed to)
        whole = await api.history(token, chat_id)
        assert shown(whole["messages"]) == [
            ("scribe", "user", "one"),
            ("scribe", "assistant", 'You said: "one"'),
            ("critic", "user", "two"),
            ("critic", "assistant", 'You said: "two"'),
            ("scribe", "user", "three"),
            ("scribe", "assistant", 'You said: "three"'),
        ]
        assert whole["branchId"] == "main"
        # AND one assistant's history is its thread alone
        critic = await api.history(token, chat_id, assistantId="critic")
        assert shown(critic["messages"]) == shown(whole["messages"])[2:4]

        # WHEN the critic's reply is regenerated, its thread forks: the chat shows the new
        # reply in the old one's place, and the scribe's thread is as it was
        events = await api.regenerate(
            token, chat_id, two["assistantMessageId"], assistantId="critic"
        )
        new_reply = events[0][1]["assistantMessageId"]
        forked = (await api.history(token, chat_id))["messages"]
        assert [m["id"] for m in forked] == [
            *[m["id"] for m in whole["messages"][:3]],
            *[m["id"] for m in whole["messages"][4:]],
            new_reply,
        ]
        assert not any(m["stale"] for m in forked)
        assert (await api.history(token, chat_id))["branchId"] == "main"
        assert (await api.history(token, chat_id, assistantId="critic"))["branchId"] == new_reply
        # AND `all` is every message of the chat, the replaced reply stale
        everything = (await api.history(token, chat_id, all="true"))["messages"]
        assert [m["id"] for m in everything] == [*[m["id"] for m in whole["messages"]], new_reply]
        assert [m["id"] for m in everything if m["stale"]] == [two["assistantMessageId"]]


async def test_a_chat_whose_default_is_another_assistant_shows_its_branch(
    database_url: str,
) -> None:
    user_id, _ = await create_user_with_chat(database_url)
    token = token_for(user_id)
    async with in_process_app(database_url, assistants=TEAM) as api:
        # GIVEN a chat of the critic alone, which the deployment's default is not
        chat_id = uuid.UUID(ok(await api.create_chat(token, assistantIds=["critic"]), 201)["id"])
        first = await say(api, token, chat_id, "hi", to="critic")
        events = await api.regenerate(
            token, chat_id, first["assistantMessageId"], assistantId="critic"
        )
        new_reply = events[0][1]["assistantMessageId"]

        # THEN the chat's history is the critic's active branch, and so is its branchId
        whole = await api.history(token, chat_id)
        assert whole["branchId"] == new_reply
        assert [m["id"] for m in whole["messages"]] == [first["userMessageId"], new_reply]
        # AND a branch asked for without an assistant is the chat's default's
        main = await api.history(token, chat_id, branchId="main")
        assert [m["id"] for m in main["messages"]] == [
            first["userMessageId"],
            first["assistantMessageId"],
        ]
