"""The quick path: stream the agent's first tokens, then finish the turn or hand it off.

Runs detached from the HTTP response, so a client that goes away mid-stream still gets its turn
persisted and handed off; the response only relays what this emits.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import TOOLS_NODE, CompiledGraphs, state_values, stream_agent_text
from agent.snapshot import APOLOGY, render_agent_snapshot
from agent.threads import ThreadId, thread_config
from handlers.errors import ERRORS
from infra import branches, chat_store
from infra.branches import Edit
from infra.chat_store import ChatId, JobAlreadyActive, MessageId, ReplyStatus, UserId
from infra.checkpoints import copy_new_checkpoints, durable_saver, load_latest_into_memory
from infra.db import Conn
from infra.events import EventSender, HandoffPayload, send_handoff
from infra.runtime import Services

logger = logging.getLogger(__name__)

Emit = Callable[[str, dict[str, Any]], Awaitable[None]]

# Compiled once per model config and tool set in this process, not once per turn.
_graphs = CompiledGraphs()


@dataclass(frozen=True)
class History:
    """The thread's latest durable checkpoint, seeded into the in-memory saver the turn runs on."""

    memory: InMemorySaver
    known: str | None  # its checkpoint id; None for a new thread


async def load_history(
    services: Services, thread_id: ThreadId, edit: Edit | None = None
) -> History:
    """The latest checkpoint; for an edit, the one the edited message's turn started from."""
    memory = InMemorySaver()
    if edit is not None and edit.base_checkpoint_id is None:
        return History(memory, None)  # the edited message began the thread
    known = await load_latest_into_memory(
        durable_saver(await services.pool()),
        memory,
        thread_id,
        edit.base_checkpoint_id if edit else None,
    )
    return History(memory, known)


@dataclass(frozen=True)
class Turn:
    user_id: UserId
    chat_id: ChatId
    assistant_id: str
    thread_id: ThreadId
    user_message_id: MessageId
    assistant_message_id: MessageId
    run_id: str
    content: str
    model_spec: dict[str, Any]
    edit: Edit | None = None  # the user message this turn replaces

    @property
    def log(self) -> dict[str, str]:
        return {"chat_id": str(self.chat_id), "correlation_id": str(self.assistant_message_id)}


async def run_turn(
    turn: Turn,
    services: Services,
    events: EventSender,
    tools: list[BaseTool],
    emit: Emit,
    history: Awaitable[History] | None = None,
) -> None:
    """Stream the turn through `emit`. `history` may already be loading (the route starts it
    while it stores the user's message); without it, the turn loads it first."""
    await emit(
        "metadata",
        {
            "chatId": str(turn.chat_id),
            "threadId": turn.thread_id,
            "userMessageId": str(turn.user_message_id),
            "assistantMessageId": str(turn.assistant_message_id),
            "runId": turn.run_id,
        },
    )
    try:
        if history is None:
            history = load_history(services, turn.thread_id, turn.edit)
        await _stream_and_persist(turn, services, events, tools, emit, await history)
    except JobAlreadyActive as exc:
        # Another request started a background job for this chat and assistant first.
        error = ERRORS[type(exc)]
        await emit("error", {"code": error.code, "message": error.message})
    except Exception:
        logger.exception("quick path failed", extra=turn.log)
        await _record_failure(turn, services)
        await emit("error", {"code": "internal", "message": APOLOGY})


async def _stream_and_persist(
    turn: Turn,
    services: Services,
    events: EventSender,
    tools: list[BaseTool],
    emit: Emit,
    history: History,
) -> None:
    pool = await services.pool()
    memory, known = history.memory, history.known
    graph = _graphs.bound(
        turn.model_spec, tools, memory, max_tool_rounds=services.settings.max_tool_rounds
    )
    config = thread_config(turn.thread_id)
    config["run_id"] = uuid.UUID(turn.run_id)
    message = HumanMessage(content=turn.content, id=str(turn.user_message_id))
    async for text in stream_agent_text(graph, {"messages": [message]}, config):
        await emit("token", {"text": text})
    state = await graph.aget_state(config)
    text = render_agent_snapshot(state_values(state)).text
    if TOOLS_NODE not in state.next:
        async with pool.connection() as conn, conn.transaction():
            head = await copy_new_checkpoints(
                memory, durable_saver(conn), turn.thread_id, known=known
            )
            await _insert_reply(conn, turn, text, status="completed")
            await _record_checkpoints(conn, turn, base=known, head=head)
        await emit(
            "done",
            {
                "assistantMessageId": str(turn.assistant_message_id),
                "status": "completed",
                "content": text,
            },
        )
        return

    event_id = str(uuid.uuid4())
    try:
        async with pool.connection() as conn, conn.transaction():
            checkpoint_id = await copy_new_checkpoints(
                memory, durable_saver(conn), turn.thread_id, known=known
            )
            await _insert_reply(conn, turn, text, status="queued", handoff_event_id=event_id)
            await _record_checkpoints(conn, turn, base=known, head=checkpoint_id)
            payload = HandoffPayload(
                chat_id=turn.chat_id,
                user_id=turn.user_id,
                assistant_id=turn.assistant_id,
                thread_id=turn.thread_id,
                root_message_id=turn.assistant_message_id,
                checkpoint_id=checkpoint_id or "",
                model_spec=turn.model_spec,
            )
            await chat_store.insert_job(
                conn,
                chat_id=turn.chat_id,
                assistant_id=turn.assistant_id,
                root_message_id=turn.assistant_message_id,
                idempotency_key=event_id,
                payload=payload.to_data(),
            )
    except psycopg.errors.UniqueViolation as exc:
        raise JobAlreadyActive(turn.chat_id) from exc
    # Committed: the turn is durable, so the client hears it at once. The job row is the
    # outbox: if the send below fails, event_sent_at stays null and the outbox relay re-sends
    # with the same id, which Inngest deduplicates.
    await emit(
        "handoff",
        {
            "assistantMessageId": str(turn.assistant_message_id),
            "eventId": event_id,
            "status": "queued",
        },
    )
    try:
        await send_handoff(events, event_id, payload)
        await chat_store.mark_events_sent(pool, [event_id])
    except Exception:
        logger.exception("handoff event not sent; left in the outbox", extra=turn.log)


async def _insert_reply(
    conn: Conn,
    turn: Turn,
    text: str,
    *,
    status: ReplyStatus,
    handoff_event_id: str | None = None,
) -> None:
    await chat_store.insert_assistant_message(
        conn,
        message_id=turn.assistant_message_id,
        chat_id=turn.chat_id,
        assistant_id=turn.assistant_id,
        content=text,
        status=status,
        parent_id=turn.user_message_id,
        metadata={"model": turn.model_spec.get("model"), "runId": turn.run_id},
        handoff_event_id=handoff_event_id,
    )


async def _record_checkpoints(
    conn: Conn, turn: Turn, *, base: str | None, head: str | None
) -> None:
    await branches.record_turn(
        conn,
        chat_id=turn.chat_id,
        assistant_id=turn.assistant_id,
        user_message_id=turn.user_message_id,
        assistant_message_id=turn.assistant_message_id,
        base_checkpoint_id=base,
        head_checkpoint_id=head,
        edit=turn.edit,
    )


async def _record_failure(turn: Turn, services: Services) -> None:
    """The user's message stays; an assistant message in `error` says the turn failed."""
    try:
        pool = await services.pool()
        async with pool.connection() as conn:
            await _insert_reply(conn, turn, APOLOGY, status="error")
    except Exception:
        logger.exception("could not record the failed turn", extra=turn.log)
