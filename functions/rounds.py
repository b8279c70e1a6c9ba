"""The model rounds of one background job, each the body of a step.

A round runs on an in-memory copy of the thread's latest checkpoint; its checkpoints land in one
transaction, and only while the run still holds the job. A round canceled half-way leaves the
thread as it was, not with an answer the user never saw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import StateSnapshot

from agent.graph import (
    AGENT_NODE,
    TOOLS_NODE,
    AgentGraph,
    pending_tool_calls,
    state_values,
    stream_agent_text,
    unanswered_calls_closed,
)
from agent.snapshot import PARAGRAPH_BREAK, render_agent_snapshot, turn_text
from agent.state import AgentState, ToolInvocation
from agent.threads import ThreadId, thread_config
from infra import branches, chat_store
from infra.checkpoints import copy_new_checkpoints, durable_saver, load_latest_into_memory
from infra.db import Conn
from infra.drafts import DraftWriter
from infra.events import HandoffPayload
from infra.job_control import hold_job
from infra.runtime import Services
from infra.tool_results import ToolResult

logger = logging.getLogger(__name__)

GraphFor = Callable[[HandoffPayload, BaseCheckpointSaver[Any]], AgentGraph]


class Plan(TypedDict):
    """What the function does next, as a step output (JSON)."""

    done: bool
    pending: list[dict[str, Any]]
    # The job is no longer this run's (canceled, or taken over after the lease): stop quietly.
    stopped: NotRequired[bool]
    # An enqueued message's job: its turn has not begun, the first round starts it.
    opening: NotRequired[bool]


def plan_from(state: StateSnapshot) -> Plan:
    if TOOLS_NODE in state.next:
        return {"done": False, "pending": pending_tool_calls(state.values["messages"])}
    return {"done": AGENT_NODE not in state.next, "pending": []}


@dataclass(frozen=True)
class Rounds:
    """The rounds of the job `job_key`, as held by the Inngest run `run_id`."""

    services: Services
    graph_for: GraphFor
    payload: HandoffPayload
    job_key: str
    run_id: str
    log: dict[str, str]

    @property
    def thread_id(self) -> ThreadId:
        return ThreadId(self.payload.thread_id)

    async def resume(self, results: list[ToolResult]) -> Plan:
        """Apply the tool results, then run the model to its next tool boundary or the end."""
        memory, known, graph = await self._from_latest()
        config = thread_config(self.thread_id)
        state = await graph.aget_state(config)
        answered = {m.tool_call_id for m in state.values["messages"] if isinstance(m, ToolMessage)}
        fresh = [r for r in results if r["id"] not in answered]
        # Applying results is keyed by tool call id: a retried round applies nothing twice.
        if fresh and TOOLS_NODE in state.next:
            calls = {c["id"]: c for c in pending_tool_calls(state.values["messages"])}
            invocations: list[ToolInvocation] = [
                {
                    "id": r["id"],
                    "name": r["name"],
                    "args": calls.get(r["id"], {}).get("args", {}),
                    "status": "completed",
                }
                for r in fresh
            ]
            messages = [
                ToolMessage(
                    content=r["content"],
                    tool_call_id=r["id"],
                    name=r["name"],
                    artifact=r.get("artifact"),
                )
                for r in fresh
            ]
            await graph.aupdate_state(
                config,
                {"messages": messages, "tool_invocations": invocations, "status": "running_tools"},
                as_node=TOOLS_NODE,
            )
            state = await graph.aget_state(config)
            # Subscribers see the tools done before this round's text starts to stream.
            async with (await self.services.pool()).connection() as conn:
                await self._record_snapshot(conn, state)
        if AGENT_NODE in state.next:
            before = turn_text(state_values(state))
            await self._stream(graph, None, before + PARAGRAPH_BREAK if before else "")
            state = await graph.aget_state(config)
        return await self._persist(memory, known, state)

    async def open(self) -> Plan:
        """The first round of an enqueued message's turn, from the latest checkpoint."""
        memory, known, graph = await self._from_latest()
        config = thread_config(self.thread_id)
        previous = state_values(await graph.aget_state(config)).get("messages", [])
        message = HumanMessage(
            content=self.payload.content or "", id=str(self.payload.user_message_id)
        )
        opening: list[AnyMessage] = [*unanswered_calls_closed(previous), message]
        await self._stream(graph, {"messages": opening}, "")
        return await self._persist(memory, known, await graph.aget_state(config), opening=True)

    async def _from_latest(self) -> tuple[InMemorySaver, str | None, AgentGraph]:
        memory = InMemorySaver()
        durable = durable_saver(await self.services.pool())
        known = await load_latest_into_memory(durable, memory, self.thread_id)
        return memory, known, self.graph_for(self.payload, memory)

    async def _persist(
        self,
        memory: InMemorySaver,
        known: str | None,
        state: StateSnapshot,
        *,
        opening: bool = False,
    ) -> Plan:
        """The round's checkpoints land in one transaction, while this run holds the job."""
        payload = self.payload
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await hold_job(conn, self.job_key, self.run_id):
                return {"done": True, "pending": [], "stopped": True}
            head = await copy_new_checkpoints(
                memory, durable_saver(conn), self.thread_id, known=known
            )
            await self._record_snapshot(conn, state)
            if opening and payload.user_message_id is not None:
                reply_id = chat_store.MessageId(payload.root_message_id)
                branch = await branches.mark_user_message(
                    conn,
                    chat_id=chat_store.ChatId(payload.chat_id),
                    assistant_id=payload.assistant_id,
                    message_id=chat_store.MessageId(payload.user_message_id),
                    reply_id=reply_id,
                    base_checkpoint_id=known,
                    edit=None,
                )
                await branches.mark_reply(conn, reply_id, branches.reply_marks(head, branch))
        return plan_from(state)

    async def _record_snapshot(self, conn: Conn, state: StateSnapshot) -> None:
        snapshot = render_agent_snapshot(state_values(state)).to_metadata()
        message_id = chat_store.MessageId(self.payload.root_message_id)
        await chat_store.record_snapshot(conn, message_id, snapshot)

    async def _stream(self, graph: AgentGraph, graph_input: AgentState | None, prefix: str) -> None:
        settings = self.services.settings
        writer = DraftWriter(
            await self.services.pool(),
            message_id=chat_store.MessageId(self.payload.root_message_id),
            chat_id=chat_store.ChatId(self.payload.chat_id),
            # The draft is the whole message: earlier text, then this round's paragraph.
            text=prefix,
            interval=settings.draft_interval_ms / 1000,
            max_bytes=settings.draft_max_bytes,
        )
        await writer.start()
        async for text in stream_agent_text(graph, graph_input, thread_config(self.thread_id)):
            await writer.append(text)
        await writer.flush()
        logger.info("model round streamed", extra={**self.log, "draft_writes": writer.writes})
