"""Several assistants in one chat: a message that mentions several gets one reply from each, in
mention order (the first on the quick path, the others in the background, each in its own
slot), and each assistant hears what the others said publicly, by name, and nothing of their
tool calls: through the scripted model and through both provider packages."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent.assistants import Assistant, Assistants
from demo.assistants import ASSISTANTS as DEMO
from demo.tools import calc
from tests.api import ok
from tests.fake_providers import Reply, ToolCall, anthropic_texts, serve_fake_providers
from tests.support import (
    Stack,
    create_user_with_chat,
    durable_messages,
    fetch,
    running_stack,
    token_for,
)

# Inngest's latency before each call of /api/inngest (docs/checks.md).
CALL_DELAY_S = 0.05


def message(chat_id: uuid.UUID, content: str, **extra: Any) -> dict[str, Any]:
    return {"chatId": str(chat_id), "content": content, **extra}


@asynccontextmanager
async def helper_and_calculator(database_url: str) -> AsyncIterator[tuple[Stack, str, uuid.UUID]]:
    """A running stack whose executor answers with Inngest's latency, and a user's chat with the
    demo's helper (its default) and calculator: (the stack, the user's token, the chat)."""
    user_id, chat_id = await create_user_with_chat(
        database_url, assistants=["default", "calculator"]
    )
    async with running_stack(database_url) as stack:
        stack.executor.call_delay_s = CALL_DELAY_S
        yield stack, token_for(user_id), chat_id


async def test_two_mentions_get_two_replies_in_mention_order(database_url: str) -> None:
    async with helper_and_calculator(database_url) as (stack, token, chat_id):
        # GIVEN the helper (the chat's default) answered once already
        await stack.respond(token, message(chat_id, "@helper first"))
        # WHEN a message mentions the calculator, then the helper
        content = "@Calculator and @helper: hello"
        events = await stack.respond(token, message(chat_id, content))
        await stack.executor.wait_idle()
        helper_thread = await durable_messages(database_url, chat_id, "default")
        shown = await stack.messages(token, chat_id)
        # (and later the user edits it, for the calculator: the message is that one's)
        [user_message] = await fetch(
            database_url, "select * from message where role = 'user' and content = %s", content
        )
        edit = {"assistantId": "calculator", "editOf": str(user_message["id"])}
        edited = await stack.respond(token, message(chat_id, "@helper too: edited", **edit))
        await stack.executor.wait_idle()

    # THEN the calculator, mentioned first, answers on the quick path, and the stream names the
    # other reply the message started
    metadata = events[0][1]
    assert metadata["assistantId"] == "calculator"
    [other] = metadata["otherReplies"]
    assert other["assistantId"] == "default"
    assert events[-1][0] == "done"
    # AND the helper's reply, run whole in the background in its own slot, completes too
    replies = {
        r["assistant_id"]: r
        for r in await fetch(
            database_url, "select * from message where parent_message_id = %s", user_message["id"]
        )
    }
    assert set(replies) == {"calculator", "default"}
    helper = replies["default"]
    assert str(helper["id"]) == other["assistantMessageId"]
    assert helper["status"] == "completed"
    assert helper["content"] == f'You said: "{content}"'
    assert str(replies["calculator"]["id"]) == metadata["assistantMessageId"]
    # AND the chat's history, stored at one instant as they were, lists the replies after the
    # message in mention order
    [asked] = [m for m in shown if m["content"] == content]
    assert [(m["role"], m["assistantId"]) for m in shown[shown.index(asked) :]] == [
        ("user", "calculator"),
        ("assistant", "calculator"),
        ("assistant", "default"),
    ]
    # AND the message is stored once, for its first addressee, naming all of them in order
    assert user_message["assistant_id"] == "calculator"
    assert user_message["metadata"]["addressedTo"] == ["calculator", "default"]
    jobs = await fetch(database_url, "select * from job_runs where root_message_id = any(%s)",
                       [r["id"] for r in replies.values()])  # fmt: skip
    assert {j["assistant_id"]: (j["kind"], j["status"]) for j in jobs} == {
        "calculator": ("quick", "completed"),
        "default": ("turn", "completed"),
    }
    # AND the helper's thread went on from its own turn with the user's message
    assert [m.content for m in helper_thread if isinstance(m, HumanMessage)] == [
        "@helper first",
        content,
    ]
    # AND the message keeps the marks of the calculator's turn, which began its thread: an edit
    # forks that thread, and the helper, which answered the message too, answers the edit
    # (tests/functions/test_several_assistants_branches.py)
    assert user_message["metadata"]["checkpointId"] is None
    assert edited[0][1]["assistantId"] == "calculator"
    assert [r["assistantId"] for r in edited[0][1]["otherReplies"]] == ["default"]
    assert edited[-1][0] == "done"


async def test_a_further_addressee_whose_slot_is_taken_refuses_the_whole_message(
    database_url: str,
) -> None:
    async with helper_and_calculator(database_url) as (stack, token, chat_id):
        # GIVEN the helper is busy in the background
        busy = await stack.respond(token, message(chat_id, "@helper\n/sleep 1"))
        assert busy[-1][0] == "handoff"
        [before] = await fetch(database_url, "select count(*) as n from message")
        # WHEN a message to the calculator and the helper is sent with `reject` (the default)
        response = await stack.respond_response(token, message(chat_id, "@calculator @helper hi"))
        # THEN it is refused, nothing of it stored, the calculator's free slot left free
        assert ok(response, 409)["error"]["code"] == "job_in_progress"
        assert await fetch(database_url, "select count(*) as n from message") == [before]
        # AND with `enqueue` the helper's reply waits behind its job, the calculator answers
        events = await stack.respond(
            token, message(chat_id, "@calculator @helper hi", multitaskStrategy="enqueue")
        )
        assert events[-1][0] == "done"
        await stack.executor.wait_idle()
    helper_replies = await fetch(
        database_url,
        "select status from message where role = 'assistant' and assistant_id = 'default'",
    )
    assert [r["status"] for r in helper_replies] == ["completed", "completed"]


async def test_an_assistant_hears_the_others_replies_by_name_and_none_of_their_tools(
    database_url: str,
) -> None:
    async with helper_and_calculator(database_url) as (stack, token, chat_id):
        # GIVEN the calculator answered with a tool, in the background
        asked = "@calculator\n/calc 6*7"
        events = await stack.respond(token, message(chat_id, asked))
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle()
        # WHEN the helper is asked, then asked again
        first = await stack.respond(token, message(chat_id, "@helper what did it say?"))
        again = await stack.respond(token, message(chat_id, "@helper and now?"))
    assert first[-1][0] == again[-1][0] == "done"
    [answer] = await fetch(
        database_url,
        "select content from message where assistant_id = 'calculator' and role = 'assistant'",
    )
    assert "calc returned 42." in answer["content"]

    # THEN the helper's model was given the calculator's reply, attributed, once, before the
    # question; and the user's message to it, as the user's
    helper = await durable_messages(database_url, chat_id, "default")
    assert [m.content for m in helper if isinstance(m, HumanMessage)] == [
        f"[User] {asked}",
        f"[Calculator] {answer['content']}",
        "@helper what did it say?",
        "@helper and now?",
    ]
    # AND none of the calculator's tool calls or results
    assert not any(isinstance(m, ToolMessage) for m in helper)
    assert not any(isinstance(m, AIMessage) and m.tool_calls for m in helper)
    # AND the calculator's own thread holds them, and nothing of the helper
    calculator = await durable_messages(database_url, chat_id, "calculator")
    assert any(isinstance(m, ToolMessage) for m in calculator)
    assert not any("[Helper]" in str(m.content) for m in calculator)


async def test_through_two_providers_the_second_hears_the_first_by_name(
    database_url: str,
) -> None:
    writer = Assistant(id="writer", name="Writer", model="openai:gpt-4o-mini", tools=[calc])
    reviewer = Assistant(id="reviewer", name="Reviewer", model="anthropic:claude-haiku-4-5")
    user_id, chat_id = await create_user_with_chat(database_url, assistants=["writer", "reviewer"])
    token = token_for(user_id)
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
            # GIVEN the writer (OpenAI) answered with a tool
            fake.script(
                Reply(
                    text=["Let me ", "work it out."],
                    tool_calls=[ToolCall("calc", {"input": "6*7"})],
                ),
                Reply(text=["It is ", "42."]),
            )
            events = await stack.respond(token, message(chat_id, "@Writer what is 6*7?"))
            assert events[-1][0] == "handoff"
            await stack.executor.wait_idle()
            # WHEN the reviewer (Anthropic) is mentioned next, then again
            fake.script(Reply(text=["Correct."]), Reply(text=["Still correct."]))
            reviewed = await stack.respond(token, message(chat_id, "@reviewer is that right?"))
            again = await stack.respond(token, message(chat_id, "@reviewer sure?"))
    assert reviewed[-1][0] == again[-1][0] == "done"
    [first, second] = fake.bodies("anthropic")
    # THEN the reviewer's request carries the writer's reply, attributed, after the user's
    # message to the writer and before the question, as text alone: none of the writer's tool
    # calls or results
    assert anthropic_texts(first) == [
        "[User] @Writer what is 6*7?",
        "[Writer] Let me work it out.\n\nIt is 42.",
        "@reviewer is that right?",
    ]
    assert "calc" not in str(first)
    # (while the writer's own requests carried them)
    assert "tool_calls" in str(fake.bodies("openai")[-1]["messages"])
    # AND asked again, the reviewer is not given the writer's reply twice
    assert str(second["messages"]).count("[Writer]") == 1
    assert anthropic_texts(second)[-1] == "@reviewer sure?"
