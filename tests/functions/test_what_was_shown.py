"""What the user saw stays, through the real OpenAI and Anthropic packages against the fake
providers: a background round whose stream is cut and which, run again, gets another answer;
a provider that fails mid-answer, on the quick path and in a background round.

The page shows the quick path's tokens, then the reply's drafts, then its stored content: each
one must begin with the one before it, whatever the provider did.
"""

from __future__ import annotations

import pytest

from agent.errors import USER_TEXT, ModelErrorKind
from agent.snapshot import RESTARTED_TEXT
from tests.fake_providers import CutStream, Reply, StreamError, ToolCall, Varying, retold
from tests.fake_providers.script import Fault
from tests.functions.test_real_providers import MODELS, reply_row, stack_on, tokens
from tests.support import DRAFT_LOG_SQL, create_user_with_chat, execute, fetch, token_for

# The quick path's answer: text, and a tool call that hands the turn off.
WORKING = Reply(text=["Let me ", "work it out."], tool_calls=[ToolCall("calc", {"input": "6*7"})])
DRAFTS_SQL = "select draft_content from draft_write_log order by at"


async def drafts_shown(database_url: str) -> list[str]:
    return [row["draft_content"] for row in await fetch(database_url, DRAFTS_SQL)]


@pytest.mark.parametrize("model", MODELS)
async def test_a_round_cut_mid_stream_and_answered_anew_keeps_what_it_showed(
    database_url: str, model: str
) -> None:
    await execute(database_url, DRAFT_LOG_SQL)
    user_id, chat_id = await create_user_with_chat(database_url)
    auth = token_for(user_id)
    # Every draft written at once, so the page's view is each write.
    async with stack_on(database_url, model, draft_interval_ms=0) as (stack, fake):
        # GIVEN a provider whose round answer is cut after 8 words, and which, asked again,
        # answers something else, and shorter
        fake.vary(Varying(first=WORKING, faults={1: CutStream(after=8)}))
        events = await stack.respond(auth, {"chatId": str(chat_id), "content": "?"})
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle()
        bodies = [r.body for r in fake.requests]
        drafts = await drafts_shown(database_url)
        await stack.respond(auth, {"chatId": str(chat_id), "content": "And then?"})
        sent = str(fake.requests[-1].body["messages"])
    row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
    cut = "".join(retold(1, bodies[1]).text[:8])
    again = "".join(retold(2, bodies[2]).text)
    # THEN the reply keeps the 8 words the page showed, says the answer started over, and
    # ends with the new answer
    assert row["status"] == "completed"
    assert row["content"] == f"Let me work it out.\n\n{cut}\n\n{RESTARTED_TEXT}\n\n{again}"
    # AND no draft the page showed was taken back: each begins with the one before it, and
    # the stored reply with the last of them
    assert any(cut in d for d in drafts)
    for earlier, later in zip(drafts, [*drafts[1:], row["content"]], strict=True):
        assert later.startswith(earlier)
    # AND the provider, on the next turn, reads its own answer only
    assert again.strip() in sent
    assert cut.strip() not in sent


async def test_with_broadcast_drafts_a_round_answered_anew_keeps_what_it_showed(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    overrides = {"draft_interval_ms": 0, "draft_transport": "broadcast"}
    async with stack_on(database_url, MODELS[0], **overrides) as (stack, fake):
        # GIVEN drafts kept in broadcast_draft, and the same provider as above
        fake.vary(Varying(first=WORKING, faults={1: CutStream(after=8)}))
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
        await stack.executor.wait_idle()
        bodies = [r.body for r in fake.requests]
    row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
    cut = "".join(retold(1, bodies[1]).text[:8])
    again = "".join(retold(2, bodies[2]).text)
    assert row["content"] == f"Let me work it out.\n\n{cut}\n\n{RESTARTED_TEXT}\n\n{again}"


@pytest.mark.parametrize("model", MODELS)
async def test_a_round_run_again_that_says_the_same_continues_without_a_note(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    words = [f"w{i} " for i in range(12)]
    async with stack_on(database_url, model, draft_interval_ms=0) as (stack, fake):
        # GIVEN a round cut after 6 words, whose second attempt says the same, then more
        fake.script(WORKING, Reply(text=words, fault=CutStream(after=6)), Reply(text=words))
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
        await stack.executor.wait_idle()
    row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
    # THEN the answer simply goes on from what was shown
    assert (row["status"], row["content"]) == (
        "completed",
        "Let me work it out.\n\n" + "".join(words),
    )


def failed(shown: str, kind: ModelErrorKind) -> str:
    return f"{shown}\n\n({USER_TEXT[kind]})"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(
    "fault",
    [StreamError(after=2), CutStream(after=2)],
    ids=["the provider's error event mid-answer", "connection dropped mid-answer"],
)
async def test_a_provider_failure_mid_answer_on_the_quick_path_keeps_what_was_shown(
    database_url: str, model: str, fault: Fault
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with stack_on(database_url, model) as (stack, fake):
        # GIVEN a provider that fails after two chunks of its answer
        fake.script(Reply(text=["The answer ", "is ", "long."], fault=fault))
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
    # THEN the page was sent those chunks, then the reply's ending: what it showed, and what
    # happened after it
    assert tokens(events) == ["The answer ", "is "]
    ended = failed("The answer is ", "model_unavailable")
    code, message = "model_unavailable", USER_TEXT["model_unavailable"]
    assert events[-1] == ("error", {"code": code, "message": message, "content": ended})
    row = await reply_row(database_url, events[0][1]["assistantMessageId"])
    assert (row["status"], row["content"]) == ("error", ended)


@pytest.mark.parametrize("model", MODELS)
async def test_a_provider_failure_mid_answer_in_a_round_keeps_what_was_shown(
    database_url: str, model: str
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with stack_on(database_url, model, draft_interval_ms=0) as (stack, fake):
        # GIVEN a provider that fails mid-answer on every attempt of the round
        fake.script(WORKING)
        fake.vary(lambda n, body: Reply(text=["So far ", "so good, ", "and"], fault=StreamError(2)))
        events = await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "?"})
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    # THEN after its last attempt the job fails, and the reply keeps what the round showed,
    # then says what happened
    assert run.status == "failed"
    row = await reply_row(database_url, events[-1][1]["assistantMessageId"])
    shown = "Let me work it out.\n\nSo far so good, "
    assert (row["status"], row["content"]) == ("error", failed(shown, "model_unavailable"))
