"""Who answers in a shared chat: with people besides its owner, an assistant answers only the
messages that name it (by @-mention or `assistantId`). A message that names nobody is posted
to the chat: stored with its sender, answered by nobody, and heard by every assistant at its
next turn. An edit that names nobody goes where the message it replaces went."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import HumanMessage

from agent.assistants import Assistant, Assistants
from demo.assistants import ASSISTANTS as DEMO
from tests.api import Api, ok
from tests.fake_providers import Reply, anthropic_texts, serve_fake_providers
from tests.support import (
    create_user_with_chat,
    durable_messages,
    execute,
    fetch,
    in_process_app,
    running_stack,
    token_for,
)

ADD_USER_SQL = "insert into auth.users (id, email) values (%s, %s)"
ROWS_SQL = """
select m.role, m.assistant_id, m.sender_id, m.metadata, m.content,
  (select count(*) from public.job_runs j where j.chat_id = m.chat_id) as jobs
from public.message m where m.chat_id = %s order by m.created_at, m.role desc
"""
# Inngest's latency before each call of /api/inngest (docs/checks.md).
CALL_DELAY_S = 0.05


def message(chat_id: uuid.UUID, content: str, **extra: Any) -> dict[str, Any]:
    return {"chatId": str(chat_id), "content": content, **extra}


async def shared_chat(
    database_url: str, api: Api, assistants: Sequence[str] = ()
) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """(owner, member, chat): the owner's chat, with a member the owner added."""
    owner, chat_id = await create_user_with_chat(database_url, assistants=assistants)
    member = uuid.uuid4()
    await execute(database_url, ADD_USER_SQL, member, f"member-{member}@test.example")
    ok(await api.add_member(token_for(owner), chat_id, userId=str(member)), 201)
    return owner, member, chat_id


async def test_a_message_naming_nobody_is_posted_and_heard_at_the_next_turn(
    database_url: str,
) -> None:
    async with running_stack(database_url) as stack:
        stack.executor.call_delay_s = CALL_DELAY_S
        owner, member, chat_id = await shared_chat(database_url, stack, ["default", "calculator"])
        # WHEN the member says hello to everyone
        events = await stack.respond(token_for(member), message(chat_id, "Hello everyone"))
        # THEN the stream says it was posted, and nobody answers
        [(first, metadata), (last, done)] = events
        assert (first, metadata["assistantMessageId"], metadata["assistantId"]) == (
            "metadata",
            None,
            None,
        )
        assert (last, done["status"], done["userMessageId"]) == (
            "done",
            "posted",
            metadata["userMessageId"],
        )
        [row] = await fetch(database_url, ROWS_SQL, chat_id)
        assert (row["role"], row["sender_id"], row["jobs"]) == ("user", member, 0)
        assert row["metadata"]["addressedTo"] == []
        # AND the history shows it, from the member, to no assistant
        [shown] = await stack.messages(token_for(owner), chat_id)
        assert (shown["senderId"], shown["assistantId"]) == (str(member), None)
        # WHEN the owner then asks the helper
        await stack.respond(token_for(owner), message(chat_id, "@helper what was said?"))
        await stack.executor.wait_idle()
        # THEN the helper answered, having heard the member's message once, by name
        rows = await fetch(database_url, ROWS_SQL, chat_id)
        assert [(r["role"], r["assistant_id"]) for r in rows] == [
            ("user", ""),
            ("user", "default"),
            ("assistant", "default"),
        ]
        heard = [
            m.content
            for m in await durable_messages(database_url, chat_id, "default")
            if isinstance(m, HumanMessage)
        ]
        assert heard == ["[User] Hello everyone", "@helper what was said?"]


async def test_a_named_assistant_answers_whoever_names_it(database_url: str) -> None:
    async with in_process_app(database_url) as api:
        owner, member, chat_id = await shared_chat(database_url, api, ["default", "calculator"])
        # WHEN the member mentions the calculator, and the owner names the helper by id
        by_mention = await api.respond(token_for(member), message(chat_id, "@calculator 6*7?"))
        by_id = await api.respond(
            token_for(owner), message(chat_id, "and you?", assistantId="default")
        )
        # THEN each is answered by the one named, as its sender's turn
        assert by_mention[0][1]["assistantId"] == "calculator"
        assert by_id[0][1]["assistantId"] == "default"
        assert by_mention[-1][0] == by_id[-1][0] == "done"
        senders = await fetch(
            database_url,
            "select assistant_id, sender_id from public.job_runs where chat_id = %s",
            chat_id,
        )
        assert {(r["assistant_id"], r["sender_id"]) for r in senders} == {
            ("calculator", member),
            ("default", owner),
        }


async def test_a_chat_of_one_assistant_is_answered_only_when_named_once_shared(
    database_url: str,
) -> None:
    helper, *_ = DEMO
    async with in_process_app(database_url, assistants=Assistants([helper])) as api:
        owner, member, chat_id = await shared_chat(database_url, api)
        # WHEN the member writes without naming the only assistant, then names it
        posted = await api.respond(token_for(member), message(chat_id, "hi all"))
        answered = await api.respond(token_for(member), message(chat_id, "@helper hi"))
        # THEN the first is posted, the second answered
        assert posted[-1][1]["status"] == "posted"
        assert answered[0][1]["assistantId"] == helper.id
        assert answered[-1][1]["status"] == "completed"
        # AND once the member is removed, the owner's chat is answered as before
        removed = await api.remove_member(token_for(owner), chat_id, member)
        assert removed.status_code == 204, removed.text
        alone = await api.respond(token_for(owner), message(chat_id, "hello"))
        assert alone[-1][1]["status"] == "completed"


async def test_an_edit_naming_nobody_goes_where_the_message_went(database_url: str) -> None:
    async with in_process_app(database_url) as api:
        owner, member, chat_id = await shared_chat(database_url, api, ["default", "calculator"])
        token = token_for(member)
        await api.respond(token, message(chat_id, "@calculator 6*7?"))
        posted = await api.respond(token, message(chat_id, "hello everyone"))
        [asked, _, hello] = await fetch(
            database_url,
            "select id from public.message where chat_id = %s order by created_at, role desc",
            chat_id,
        )
        # GIVEN the owner may not edit the member's question: members edit their own
        theirs = await api.respond_response(
            token_for(owner), message(chat_id, "6*9?", editOf=str(asked["id"]))
        )
        assert ok(theirs, 404)["error"]["code"] == "message_not_found"
        # WHEN the member edits the question without naming anyone
        edited = await api.respond(token, message(chat_id, "6*8?", editOf=str(asked["id"])))
        # THEN the calculator answers the edit
        assert edited[0][1]["assistantId"] == "calculator"
        assert edited[-1][1]["status"] == "completed"
        # AND a message posted to the chat only cannot be edited: nothing answered it
        assert hello["id"] == uuid.UUID(posted[0][1]["userMessageId"])
        refused = await api.respond_response(token, message(chat_id, "hi", editOf=str(hello["id"])))
        assert ok(refused, 409)["error"]["code"] == "message_not_editable"


async def test_posting_counts_against_the_senders_messages_per_minute(
    database_url: str,
) -> None:
    async with in_process_app(database_url, max_turns_per_minute=2) as api:
        _, member, chat_id = await shared_chat(database_url, api, ["default", "calculator"])
        token = token_for(member)
        for text in ("one", "two"):
            await api.respond(token, message(chat_id, text))
        # WHEN the member posts a third message within the minute
        refused = await api.respond_response(token, message(chat_id, "three"))
        # THEN it is refused and not stored
        assert ok(refused, 429)["error"]["code"] == "too_many_turns"
        assert len(await fetch(database_url, ROWS_SQL, chat_id)) == 2


async def test_a_posted_message_reaches_a_real_provider_once_by_name(database_url: str) -> None:
    writer = Assistant(id="writer", name="Writer", model="openai:gpt-4o-mini")
    reviewer = Assistant(id="reviewer", name="Reviewer", model="anthropic:claude-haiku-4-5")
    async with serve_fake_providers() as fake:
        keys: dict[str, Any] = {
            "openai_base_url": fake.openai_base_url,
            "openai_api_key": "test-key",
            "anthropic_base_url": fake.anthropic_base_url,
            "anthropic_api_key": "test-key",
        }
        assistants = Assistants([*DEMO, writer, reviewer])
        async with running_stack(database_url, assistants=assistants, **keys) as stack:
            stack.executor.call_delay_s = CALL_DELAY_S
            owner, member, chat_id = await shared_chat(database_url, stack, ["writer", "reviewer"])
            # GIVEN the member posts to the chat, naming nobody
            await stack.respond(token_for(member), message(chat_id, "Hello everyone"))
            # WHEN the owner asks the reviewer (Anthropic) twice, answered differently each time
            fake.script(Reply(text=["Hi."]), Reply(text=["Hi again."]))
            first = await stack.respond(token_for(owner), message(chat_id, "@reviewer hi?"))
            again = await stack.respond(token_for(owner), message(chat_id, "@reviewer still?"))
    assert first[-1][1]["content"] == "Hi."
    assert again[-1][1]["content"] == "Hi again."
    # THEN its first request carries the posted message, attributed, before the question
    earlier, later = fake.bodies("anthropic")
    assert anthropic_texts(earlier) == ["[User] Hello everyone", "@reviewer hi?"]
    # AND the second does not give it again
    assert str(later["messages"]).count("Hello everyone") == 1
    # AND nothing went to the writer (OpenAI), which nobody named
    assert fake.bodies("openai") == []
