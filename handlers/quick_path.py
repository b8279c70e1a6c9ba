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

from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import (
    TOOLS_NODE,
    CompiledGraphs,
    state_values,
    stream_agent_text,
    unanswered_calls_closed,
)
from agent.snapshot import (
    APOLOGY,
    INCOMPATIBLE_VERSION,
    INTERRUPTED,
    AgentSnapshot,
    render_agent_snapshot,
)
from agent.state import checkpoint_schema, readable_schema
from agent.threads import ThreadId, thread_config
from infra import branches, chat_store
from infra.branches import Edit
from infra.chat_store import ChatId, MessageId, ReplyStatus, UserId
from infra.checkpoints import copy_new_checkpoints, durable_saver, load_latest_into_memory
from infra.db import Conn
from infra.events import EventSender, HandoffPayload, send_handoff
from infra.runtime import Services
from infra.turns import send_queued_turns

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
    job_key: str  # the turn's job (it holds the chat's slot) and its handoff event id
    edit: Edit | None = None  # the user message this turn replaces

    @property
    def log(self) -> dict[str, str]:
        return {"chat_id": str(self.chat_id), "correlation_id": str(self.assistant_message_id)}

    def metadata(self) -> dict[str, str]:
        """The data of the stream's first event."""
        return {
            "chatId": str(self.chat_id),
            "threadId": self.thread_id,
            "userMessageId": str(self.user_message_id),
            "assistantMessageId": str(self.assistant_message_id),
            "runId": self.run_id,
        }

    def handoff(self) -> dict[str, str]:
        """The data of the `handoff` event: the reply goes on in the background."""
        return {
            "assistantMessageId": str(self.assistant_message_id),
            "eventId": self.job_key,
            "status": "queued",
        }

    def handoff_payload(self, checkpoint_id: str | None) -> HandoffPayload:
        return HandoffPayload(
            chat_id=self.chat_id,
            user_id=self.user_id,
            assistant_id=self.assistant_id,
            thread_id=self.thread_id,
            root_message_id=self.assistant_message_id,
            checkpoint_id=checkpoint_id or "",
            model_spec=self.model_spec,
        )


class Interrupted(RuntimeError):
    """The turn lost its chat's slot (a cancel, or a message sent with `interrupt`)."""


class _SlotLost(RuntimeError):
    """Raised inside the persisting transaction to roll it back."""


class IncompatibleCheckpoint(RuntimeError):
    """The thread's checkpoint was written by a schema version this build cannot read."""


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
    await emit("metadata", turn.metadata())
    try:
        if history is None:
            history = load_history(services, turn.thread_id, turn.edit)
        if await _stream_and_persist(turn, services, events, tools, emit, await history):
            return  # handed off: the job goes on in the background
    except Interrupted:
        await emit("error", {"code": "interrupted", "message": INTERRUPTED})
    except IncompatibleCheckpoint:
        logger.exception("checkpoint from an incompatible version", extra=turn.log)
        await _record_failure(turn, services, INCOMPATIBLE_VERSION)
        await emit("error", {"code": "incompatible_version", "message": INCOMPATIBLE_VERSION})
    except Exception:
        logger.exception("quick path failed", extra=turn.log)
        await _record_failure(turn, services)
        await emit("error", {"code": "internal", "message": APOLOGY})
    # The turn's job ended: a message that waited behind it now holds the slot.
    await send_queued_turns(await services.pool(), events, turn.chat_id, turn.assistant_id)


async def _stream_and_persist(
    turn: Turn,
    services: Services,
    events: EventSender,
    tools: list[BaseTool],
    emit: Emit,
    history: History,
) -> bool:
    """True when the turn handed off to the background."""
    pool = await services.pool()
    memory, known = history.memory, history.known
    graph = _graphs.bound(
        turn.model_spec, tools, memory, max_tool_rounds=services.settings.max_tool_rounds
    )
    config = thread_config(turn.thread_id)
    config["run_id"] = uuid.UUID(turn.run_id)
    before = await graph.aget_state(config)
    version = checkpoint_schema(before.metadata)
    if not readable_schema(version):
        raise IncompatibleCheckpoint(f"the thread's checkpoint has schema version {version}")
    # Calls a canceled job never ran are answered first: a model must see every call answered.
    message = HumanMessage(content=turn.content, id=str(turn.user_message_id))
    opening: list[AnyMessage] = [
        *unanswered_calls_closed(state_values(before).get("messages", [])),
        message,
    ]
    streamed: list[str] = []
    async for text in stream_agent_text(graph, {"messages": opening}, config):
        streamed.append(text)
        await emit("token", {"text": text})
    state = await graph.aget_state(config)
    snapshot = render_agent_snapshot(state_values(state))
    text = snapshot.text
    handing_off = TOOLS_NODE in state.next
    try:
        async with pool.connection() as conn, conn.transaction():
            head = await _persist(conn, turn, memory, known, snapshot, handing_off)
    except _SlotLost:
        # Canceled, or another message took over: the user keeps what they saw, the thread
        # gets nothing of this turn.
        async with pool.connection() as conn:
            await _insert_reply(conn, turn, "".join(streamed), status="canceled")
        raise Interrupted from None
    if not handing_off:
        await emit(
            "done",
            {
                "assistantMessageId": str(turn.assistant_message_id),
                "status": "completed",
                "content": text,
            },
        )
        return False
    # Committed: the turn is durable, so the client hears it at once. The job row is the
    # outbox: if the send below fails, event_sent_at stays null and the outbox relay re-sends
    # with the same id, which Inngest deduplicates.
    await emit("handoff", turn.handoff())
    try:
        await send_handoff(events, turn.job_key, turn.handoff_payload(head))
        await chat_store.mark_events_sent(pool, [turn.job_key])
    except Exception:
        logger.exception("handoff event not sent; left in the outbox", extra=turn.log)
    return True


async def _persist(
    conn: Conn,
    turn: Turn,
    memory: InMemorySaver,
    known: str | None,
    snapshot: AgentSnapshot,
    handing_off: bool,
) -> str | None:
    """The turn's checkpoints, reply and job, in the caller's transaction; the head checkpoint.

    The job's update comes last and is the fence: it changes nothing when the turn lost the
    chat's slot, and then _SlotLost rolls all of this back. A cancel that came first has
    committed by then (the update waits for its row lock), so nothing lands after one.
    """
    head = await copy_new_checkpoints(memory, durable_saver(conn), turn.thread_id, known=known)
    branch = await branches.mark_user_message(
        conn,
        chat_id=turn.chat_id,
        assistant_id=turn.assistant_id,
        message_id=turn.user_message_id,
        reply_id=turn.assistant_message_id,
        base_checkpoint_id=known,
        edit=turn.edit,
    )
    status: ReplyStatus = "queued" if handing_off else "completed"
    await _insert_reply(
        conn,
        turn,
        snapshot.text,
        status=status,
        handoff_event_id=turn.job_key if handing_off else None,
        marks={**branches.reply_marks(head, branch), "snapshot": snapshot.to_metadata()},
    )
    if handing_off:
        held = await chat_store.hand_off_job(
            conn,
            idempotency_key=turn.job_key,
            run_id=turn.run_id,
            root_message_id=turn.assistant_message_id,
            payload=turn.handoff_payload(head).to_data(),
        )
    else:
        held = await chat_store.complete_quick_job(conn, turn.job_key, turn.run_id)
    if not held:
        raise _SlotLost
    return head


async def _insert_reply(
    conn: Conn,
    turn: Turn,
    text: str,
    *,
    status: ReplyStatus,
    handoff_event_id: str | None = None,
    marks: dict[str, Any] | None = None,
) -> None:
    await chat_store.insert_assistant_message(
        conn,
        message_id=turn.assistant_message_id,
        chat_id=turn.chat_id,
        assistant_id=turn.assistant_id,
        content=text,
        status=status,
        parent_id=turn.user_message_id,
        metadata={"model": turn.model_spec.get("model"), "runId": turn.run_id, **(marks or {})},
        handoff_event_id=handoff_event_id,
    )


async def _record_failure(turn: Turn, services: Services, text: str = APOLOGY) -> None:
    """The user's message stays; an assistant message in `error` says the turn failed, and the
    chat's slot is free again."""
    try:
        pool = await services.pool()
        async with pool.connection() as conn, conn.transaction():
            await _insert_reply(conn, turn, text, status="error")
        await chat_store.fail_job(
            pool, idempotency_key=turn.job_key, user_text=text, error="quick path failed"
        )
    except Exception:
        logger.exception("could not record the failed turn", extra=turn.log)
