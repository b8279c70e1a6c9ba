"""The background round's draft: throttled whole-draft writes that end equal to the message."""

from __future__ import annotations

from itertools import pairwise

import psycopg

from tests.support import DRAFT_LOG_SQL, create_user_with_chat, fetch, running_stack, token_for


async def test_background_draft_is_written_at_most_five_times_a_second(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(DRAFT_LOG_SQL)
    user_id, chat_id = await create_user_with_chat(database_url)
    # GIVEN a model streaming 5 ms tokens and a tool result it quotes at length (~200 words)
    async with running_stack(database_url, scripted_token_delay_ms=5) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/report 1.1"}
        )
        assert events[-1][0] == "handoff"
        await stack.executor.wait_idle(timeout=60)

    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    background_words = message["content"].split("\n\n", 1)[1].split(" ")
    assert len(background_words) >= 200

    # (the quick path's writes, then the round's)
    writes = await fetch(database_url, "select * from draft_write_log order by at")
    streamed = (writes[-1]["at"] - writes[0]["at"]).total_seconds()
    assert streamed >= 200 * 0.005
    # THEN at most 5 writes per second of streaming: one per 250 ms, whichever writer, plus
    # the flush when the quick path hands off and the one at the round's end
    offsets = [round((w["at"] - writes[0]["at"]).total_seconds(), 3) for w in writes]
    assert len(writes) <= 5 * streamed + 2, offsets
    handoff = max(i for i, w in enumerate(writes) if "\n\n" not in w["draft_content"])
    gaps = [(b["at"] - a["at"]).total_seconds() for a, b in pairwise(writes)]
    del gaps[handoff - 1]  # the quick path's flush
    assert all(gap >= 0.24 for gap in gaps[:-1]), gaps
    # AND seq only grows, each write is the whole draft so far, the last equals the final text
    assert [w["seq"] for w in writes] == sorted({w["seq"] for w in writes})
    assert all(b["draft_content"].startswith(a["draft_content"]) for a, b in pairwise(writes))
    assert writes[-1]["draft_content"] == message["content"]
    assert await fetch(database_url, "select * from message_draft") == []
