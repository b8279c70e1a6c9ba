"""The whole loop through the real OpenAI and Anthropic packages, against a local server that
streams each provider's wire format (tests/fake_providers): the provider is the one thing faked.

Quick path, handoff, background rounds, drafts, finalize and the next turn's history, for both
providers; then what a person sees when the provider misbehaves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest

from agent.errors import USER_TEXT
from agent.graph import BUDGET_TEXT
from agent.snapshot import CUT_SHORT_TEXT
from tests.fake_providers import FakeProviders, serve_fake_providers
from tests.fake_providers.script import (
    CleanEof,
    CutStream,
    Fault,
    RateLimited,
    Reply,
    ServerError,
    StreamError,
    ToolCall,
    Usage,
)
from tests.support import Stack, create_user_with_chat, fetch, running_stack, token_for

MODELS = ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"]
Events = list[tuple[str, dict[str, Any]]]


@asynccontextmanager
async def stack_on(
    database_url: str, model: str, **overrides: Any
) -> AsyncIterator[tuple[Stack, FakeProviders]]:
    async with serve_fake_providers() as fake:
        settings: dict[str, Any] = {
            "model": model,
            "openai_base_url": fake.openai_base_url,
            "openai_api_key": "test-key",
            "anthropic_base_url": fake.anthropic_base_url,
            "anthropic_api_key": "test-key",
            **overrides,
        }
        async with running_stack(database_url, **settings) as stack:
            yield stack, fake


def tokens(events: Events) -> list[str]:
    return [data["text"] for name, data in events if name == "token"]


async def reply_row(database_url: str, message_id: str) -> dict[str, Any]:
    [row] = await fetch(database_url, "select * from message where id = %s", message_id)
    return row


@pytest.mark.parametrize("model", MODELS)
async def test_a_plain_turn_streams_each_chunk_and_is_stored_as_it_streamed(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with stack_on(database_url, model) as (stack, fake):
        fake.script(Reply(text=["Paris ", "is the ", "capital."]))
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
    # One token event per model chunk, and what was stored is what streamed.
    assert tokens(events) == ["Paris ", "is the ", "capital."]
    assert events[-1][0] == "done"
    assert events[-1][1]["content"] == "Paris is the capital."
    row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
    assert (row["status"], row["content"]) == ("completed", "Paris is the capital.")
    assert row["metadata"]["usage"]["output"] > 0


@pytest.mark.parametrize("model", MODELS)
async def test_a_tool_turn_hands_off_completes_and_the_next_turn_sees_it(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    auth = token_for(user_id)
    async with stack_on(database_url, model) as (stack, fake):
        fake.script(
            Reply(
                text=["Let me ", "work it out."], tool_calls=[ToolCall("calc", {"input": "6*7"})]
            ),
            Reply(text=["It is ", "42."]),
        )
        events = await stack.respond(auth, {"chatId": str(chat_id), "content": "What is 6*7?"})
        assert tokens(events) == ["Let me ", "work it out."]
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle()
        row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
        assert (row["status"], row["content"]) == ("completed", "Let me work it out.\n\nIt is 42.")
        # The background round sent the tool's result in the provider's own shape.
        assert "42" in str(fake.bodies(provider_of(model))[-1]["messages"][-1])
        # WHEN the user writes again
        fake.script(Reply(text=["You're ", "welcome."]))
        await stack.respond(auth, {"chatId": str(chat_id), "content": "Thanks!"})
    # THEN the model is sent the whole conversation so far, in order
    sent = str(fake.bodies(provider_of(model))[-1]["messages"])
    for said in ("What is 6*7?", "Let me work it out.", "It is 42.", "Thanks!"):
        assert said in sent
    assert sent.index("What is 6*7?") < sent.index("It is 42.") < sent.index("Thanks!")


@pytest.mark.parametrize("model", MODELS)
async def test_a_call_with_a_wrong_argument_is_answered_by_the_model(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with stack_on(database_url, model) as (stack, fake):
        fake.script(
            Reply(text=["Checking."], tool_calls=[ToolCall("calc", {"expression": "2*3"})]),
            Reply(text=["It is 6."]),
        )
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
        await stack.executor.wait_idle()
    row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
    assert (row["status"], row["content"]) == ("completed", "Checking.\n\nIt is 6.")
    assert [p["status"] for p in row["metadata"]["snapshot"]["progress"]] == ["error"]
    # The model was told what was wrong with its call.
    assert "invalid arguments for calc" in str(fake.bodies(provider_of(model))[-1]["messages"])


@pytest.mark.parametrize("model", MODELS)
async def test_a_stream_cut_with_a_clean_end_is_not_stored_as_whole(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with stack_on(database_url, model) as (stack, fake):
        fake.script(Reply(text=["The capital ", "of France"], fault=CleanEof()))
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
    told = "The capital of France\n\n" + CUT_SHORT_TEXT["incomplete"]
    assert events[-1][1]["content"] == told
    row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
    assert row["content"] == told
    assert row["metadata"]["snapshot"]["cutShort"] == "incomplete"


@pytest.mark.parametrize("model", MODELS)
async def test_a_provider_that_stays_busy_gets_its_own_code_and_words(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with stack_on(database_url, model) as (stack, fake):
        # The SDK's own retries (two) all meet a 429 too.
        fake.script(*[Reply(fault=RateLimited(retry_after=0)) for _ in range(3)])
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
    message = USER_TEXT["rate_limited"]
    # Nothing was shown: the reply's content is the plain words alone.
    assert events[-1] == ("error", {"code": "rate_limited", "message": message, "content": message})
    rows = await fetch(database_url, "select status, content from message where role = 'assistant'")
    assert rows == [{"status": "error", "content": message}]
    [job] = await fetch(database_url, "select status, error from job_runs")
    assert job == {"status": "error", "error": "rate_limited"}
    # Nothing the chat's owner can read holds a traceback or a path.
    readable = str(await fetch(database_url, "select * from message")) + str(job)
    assert "Traceback" not in readable
    assert 'File "' not in readable


def provider_of(model: str) -> Literal["openai", "anthropic"]:
    return "openai" if model.startswith("openai:") else "anthropic"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(
    ("fault", "requests"),
    # The SDKs retry a 5xx twice; a stream that broke off after text came, never.
    [(ServerError(), 3), (CutStream(after=1), 1), (StreamError(after=1), 1)],
    ids=["5xx through every retry", "connection dropped mid-stream", "error event mid-stream"],
)
async def test_a_provider_that_cannot_answer_is_said_so_in_plain_words(
    database_url: str, model: str, fault: Fault, requests: int
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with stack_on(database_url, model) as (stack, fake):
        fake.script(*[Reply(text=["The ", "answer"], fault=fault) for _ in range(requests)])
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
        # AND the chat is free again for the next message
        fake.script(Reply(text=["Here ", "now."]))
        again = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
    message = USER_TEXT["model_unavailable"]
    # What was shown stays, the plain words after it (tests/functions/test_what_was_shown.py).
    shown = "".join(tokens(events))
    ended = f"{shown}\n\n({message})" if shown else message
    assert events[-1] == (
        "error",
        {"code": "model_unavailable", "message": message, "content": ended},
    )
    assert again[-1][0] == "done"


@pytest.mark.parametrize("model", MODELS)
async def test_a_turn_past_its_output_budget_runs_no_more_tools(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with stack_on(database_url, model, max_turn_output_tokens=40) as (stack, fake):
        # GIVEN a model call that reports 50 output tokens and asks for a tool
        fake.script(
            Reply(
                text=["Let me ", "check."],
                tool_calls=[ToolCall("calc", {"input": "1+1"})],
                usage=Usage(10, 50),
            )
        )
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
    # THEN no tool runs and the reply says why, on the quick path
    assert events[-1][0] == "done"
    assert events[-1][1]["content"] == f"Let me check.\n\n{BUDGET_TEXT}"
    assert len(fake.requests) == 1


@pytest.mark.parametrize("model", MODELS)
async def test_an_answer_past_its_time_budget_stops_the_providers_stream_and_is_stored(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    auth = token_for(user_id)
    # GIVEN a quick path that may stream for 0.5 s, and a provider answer of 40 chunks 50 ms apart
    async with stack_on(database_url, model, quick_budget_s=0.5) as (stack, fake):
        fake.script(Reply(text=[f"w{i} " for i in range(40)], chunk_delay_ms=50))
        events = await stack.respond(auth, {"chatId": str(chat_id), "content": "Tell me a lot."})
        shown = "".join(tokens(events))
        # THEN the answer stops there, stored with the plain note, the stream ending `done`
        assert 0 < len(shown.split()) < 40
        assert events[-1][0] == "done"
        assert events[-1][1]["content"] == f"{shown}\n\n{CUT_SHORT_TEXT['time']}"
        row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
        assert (row["status"], row["content"]) == ("completed", events[-1][1]["content"])
        # AND the next turn sends the provider what was shown, as the assistant's answer
        fake.script(Reply(text=["Sure."]))
        await stack.respond(auth, {"chatId": str(chat_id), "content": "Go on."})
    assert shown.strip() in str(fake.bodies(provider_of(model))[-1]["messages"])


@pytest.mark.parametrize("model", MODELS)
async def test_a_question_to_the_user_is_answered_and_the_provider_reads_the_answer(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    auth = token_for(user_id)
    question = {"question": "Which city?", "options": ["Berlin", "Lisbon"], "context": "A trip"}
    async with stack_on(database_url, model) as (stack, fake):
        fake.script(
            Reply(text=["Let me ask."], tool_calls=[ToolCall("ask_user", question)]),
            Reply(text=["Lisbon it is."]),
        )
        # GIVEN the model asks the user, through the provider's own tool call
        events = await stack.respond(auth, {"chatId": str(chat_id), "content": "Plan a trip."})
        assert events[-1][0] == "handoff"
        reply_id = events[-1][1]["assistantMessageId"]
        await stack.executor.wait_idle()
        row = await reply_row(database_url, reply_id)
        assert row["status"] == "awaiting_input"
        pending = row["metadata"]["pendingQuestion"]
        assert (pending["question"], pending["options"]) == ("Which city?", ["Berlin", "Lisbon"])
        # WHEN the user answers
        response = await stack.answer(auth, chat_id, pending["questionId"], answer="Lisbon")
        assert response.status_code == 202, response.text
        await stack.executor.wait_idle()
    # THEN the reply completes, and the provider was sent the answer as the call's result
    row = await reply_row(database_url, reply_id)
    assert (row["status"], row["content"]) == ("completed", "Let me ask.\n\nLisbon it is.")
    assert "Lisbon" in str(fake.bodies(provider_of(model))[-1]["messages"][-1])
