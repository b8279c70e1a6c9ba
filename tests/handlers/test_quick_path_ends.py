"""However a quick path ends, its reply shows what it streamed and the chat is free again: past
its time budget, or still streaming past its lease (it renews it). A quick path whose server is
killed mid-stream: tests/reliability (`quick_path_killed`)."""

from __future__ import annotations

import asyncio

from agent.snapshot import CUT_SHORT_TEXT
from tests.support import (
    create_user_with_chat,
    durable_messages,
    fetch,
    in_process_app,
    token_for,
    wait_for_row,
)

# A plain message is echoed word by word: `You said: "…"`, ~2.4 s at 40 ms a token.
LONG_TEXT = " ".join(f"word{i}" for i in range(60))


async def test_an_answer_past_the_quick_budget_stops_there_stored_and_marked(
    database_url: str,
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    # GIVEN a quick path that may stream for half a second, and an answer that takes ~2.4 s
    async with in_process_app(
        database_url, scripted_token_delay_ms=40, quick_budget_s=0.5
    ) as stack:
        events = await stack.respond(token, {"chatId": str(chat_id), "content": LONG_TEXT})
        # WHEN the budget runs out, THEN the stream ends `done` with what was shown and a note
        shown = "".join(data["text"] for kind, data in events if kind == "token")
        kind, done = events[-1]
        assert kind == "done"
        assert 0 < len(shown.split()) < 30
        assert done["content"] == f"{shown}\n\n{CUT_SHORT_TEXT['time']}"
        # AND the chat is free: the next message is answered whole
        again = await stack.respond(token, {"chatId": str(chat_id), "content": "and now?"})
        assert again[-1] == (
            "done",
            {
                "assistantMessageId": again[0][1]["assistantMessageId"],
                "status": "completed",
                "content": 'You said: "and now?"',
            },
        )
    # AND the stored reply and the thread hold the same answer, so the model sees it next time
    [reply, _] = await fetch(
        database_url, "select * from message where role = 'assistant' order by created_at"
    )
    assert (reply["status"], reply["content"]) == ("completed", done["content"])
    assert reply["metadata"]["snapshot"]["cutShort"] == "time"
    thread = await durable_messages(database_url, chat_id)
    assert [m.content for m in thread[:2]] == [LONG_TEXT, shown]


async def test_a_quick_path_streaming_past_its_lease_keeps_its_slot(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    token = token_for(user_id)
    # GIVEN a 0.6 s lease (renewed every 0.2 s) and an answer that streams ~2.4 s
    async with in_process_app(database_url, scripted_token_delay_ms=40, turn_lease_s=0.6) as stack:
        first = asyncio.create_task(
            stack.respond(token, {"chatId": str(chat_id), "content": LONG_TEXT})
        )
        await wait_for_row(database_url, "select 1 from message_draft")
        await asyncio.sleep(1.5)
        # WHEN another message comes while it still streams, THEN the live turn keeps the slot
        response = await stack.respond_response(
            token, {"chatId": str(chat_id), "content": "are you there?"}
        )
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "job_in_progress"
        # AND the first turn completes whole
        events = await first
    assert events[-1][0] == "done"
    assert events[-1][1]["content"] == f'You said: "{LONG_TEXT}"'
