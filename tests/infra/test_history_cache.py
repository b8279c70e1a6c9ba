"""A turn's history load starts from the decoded lists its process kept: the thread loads the
same as from its whole delta chain, across branches, and nothing erased is served or kept."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent.threads import ThreadId, thread_config, thread_key
from infra.db import Pool
from infra.store.checkpoints import durable_saver, load_latest_into_memory
from infra.store.heads import RECENT_HEADS
from infra.store.history_cache import HISTORY, HistoryCache
from tests.infra.test_retention import chain
from tests.support import create_user_with_chat, fetch, running_stack, token_for


async def loaded(pool: Pool, thread: ThreadId, cache: HistoryCache | None, **at: str) -> Any:
    """The channel values a turn's run starts from, loaded with `cache` or without one."""
    memory = InMemorySaver()
    checkpoint_id = at.get("checkpoint_id")
    if (
        await load_latest_into_memory(
            durable_saver(pool, cache=cache), memory, thread, checkpoint_id
        )
        is None
    ):
        return None
    found = await memory.aget_tuple(thread_config(thread))
    assert found is not None
    return found.checkpoint["channel_values"]


def contents(values: dict[str, Any]) -> list[str]:
    messages: list[BaseMessage] = values["messages"]
    return [str(m.content) for m in messages]


async def test_a_long_chain_loads_the_same_from_the_cache_as_from_its_rows(pool: Pool) -> None:
    # GIVEN a thread of 30 checkpoints, each a delta on the one before
    thread = ThreadId(f"{uuid.uuid4()}:default")
    ids = await chain(pool, thread, 30)
    cache = HistoryCache()
    for n, checkpoint_id in enumerate(ids, start=1):
        # WHEN each head loads in turn, as the turns load them, with the cache
        base = (thread, "", "messages", f"{n - 1:032}.0")
        held_before = cache.get(base) is not None
        cached = await loaded(pool, thread, cache, checkpoint_id=checkpoint_id)
        # THEN it is the same as read down the whole chain
        assert cached == await loaded(pool, thread, None, checkpoint_id=checkpoint_id)
        assert contents(cached) == [f"m{i}" for i in range(1, n + 1)]
        # AND from the second on, the last load had left the base it starts from
        assert held_before == (n > 1)
        # AND the cache holds the thread's head and the base it was read from, no more
        assert set(cache.held(thread)) <= {base, (thread, "", "messages", f"{n:032}.0")}


async def test_a_bounded_cache_drops_the_oldest_and_what_expired() -> None:
    now = [0.0]
    cache = HistoryCache(ttl_s=10, max_items=5, clock=lambda: now[0])
    cache.put(("a", "", "messages", "1"), [1, 2, 3])
    cache.put(("b", "", "messages", "1"), [1, 2])
    assert cache.items == 5
    # Over the bound, the least recently used goes first
    cache.put(("c", "", "messages", "1"), [1])
    assert cache.get(("a", "", "messages", "1")) is None
    assert cache.items == 3
    # A list longer than the bound is never held
    cache.put(("d", "", "messages", "1"), list(range(6)))
    assert cache.held("d") == {}
    # Past the time to live, nothing is served
    now[0] = 11.0
    assert cache.get(("b", "", "messages", "1")) is None
    assert len(cache) == 0


async def test_turns_fill_the_cache_and_load_what_their_rows_hold(
    database_url: str, pool: Pool
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    thread = thread_key(chat_id, "default")
    canary = f"passport-{uuid.uuid4().hex}"
    async with running_stack(database_url) as stack:
        token = token_for(user_id)
        # GIVEN five turns, the second holding a canary
        for n in range(1, 6):
            content = f"turn {n} {canary}" if n == 2 else f"turn {n}"
            events = await stack.respond(token, {"chatId": str(chat_id), "content": content})
            assert events[-1][0] == "done"
        # THEN the thread loads through the cache as it does from its rows, and the load left
        # its lists there, canary included
        assert await loaded(pool, thread, HISTORY) == await loaded(pool, thread, None)
        assert any(canary in str(items) for items in HISTORY.held(thread).values())
        # AND the process recalls the head the last turn stored, to run the next turn ahead on
        assert canary in str(RECENT_HEADS.held(thread))

        # WHEN the user deletes the canary's message (the thread is cut at its turn)
        [second] = await fetch(
            database_url, "select id from message where content = %s", f"turn 2 {canary}"
        )
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            claims = f'{{"sub": "{user_id}", "role": "authenticated"}}'
            await conn.execute("select set_config('request.jwt.claims', %s, true)", (claims,))
            await conn.execute("set local role authenticated")
            await conn.execute("delete from public.message where id = %s", (second["id"],))
            await conn.commit()
        # THEN the next load serves the cut thread, and the cache keeps nothing of the canary
        after = await loaded(pool, thread, HISTORY)
        assert after == await loaded(pool, thread, None)
        assert contents(after)[0] == "turn 1"
        assert not any(canary in str(items) for items in HISTORY.held(thread).values())
        # AND the next turn runs on the cut thread, not on the head recalled, which is gone
        events = await stack.respond(token, {"chatId": str(chat_id), "content": "turn 6"})
        assert events[-1][0] == "done"
        assert canary not in str(RECENT_HEADS.held(thread))
        said = contents(await loaded(pool, thread, None))
        assert [said[0], said[2], len(said)] == ["turn 1", "turn 6", 4]

        # WHEN the chat is deleted
        response = await stack.call("DELETE", f"/api/chats/{chat_id}", token)
        assert response.status_code == 204
    # THEN nothing loads, and the cache holds nothing of the thread after that load
    assert HISTORY.held(thread) != {}
    assert await loaded(pool, thread, HISTORY) is None
    assert HISTORY.held(thread) == {}


async def test_a_fork_and_a_branch_switch_load_their_own_heads(
    database_url: str, pool: Pool
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    thread = thread_key(chat_id, "default")
    token = token_for(user_id)

    async def said(content: str, **extra: Any) -> str:
        events = await stack.respond(token, {"chatId": str(chat_id), "content": content, **extra})
        assert events[-1][0] == "done", events
        message_id: str = events[0][1]["userMessageId"]
        return message_id

    def humans(values: dict[str, Any]) -> list[str]:
        return [str(m.content) for m in values["messages"] if m.type == "human"]

    async with running_stack(database_url) as stack:
        # GIVEN three turns, then an edit of the second: a fork from the first turn's head
        await said("first")
        second = await said("second")
        await said("third")
        await said("second, edited", editOf=second)
        # THEN the fork's head loads with the cache as from its rows
        forked = await loaded(pool, thread, HISTORY)
        assert humans(forked) == ["first", "second, edited"]
        assert forked == await loaded(pool, thread, None)

        # WHEN the user switches back to the main branch and goes on there
        response = await stack.activate(token, chat_id, "main")
        assert response.status_code == 200, response.text
        await said("fourth")
    # THEN the turn ran on the main branch's head, not the fork's the cache held last
    main = await loaded(pool, thread, HISTORY)
    assert humans(main) == ["first", "second", "third", "fourth"]
    assert main == await loaded(pool, thread, None)
