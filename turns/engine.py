"""What the quick path and the background rounds share: a run on an in-memory copy of the
thread, and one way to store it.

A turn's run starts from the head of the chat's active branch (or, for an edit or a regenerated
reply, from the checkpoint the replaced turn began from), and a later round of it from the
thread's latest durable checkpoint, the turn's own; either is seeded into an in-memory saver, so
streaming writes nothing to the database.
Its checkpoints land afterwards in one transaction, together with whatever else the caller
stores and behind the job fence (infra/store/jobs.py): a run that lost its job leaves the thread
as it was.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import StateSnapshot
from opentelemetry.trace import SpanKind, StatusCode

from agent.assistants import Assistant
from agent.graph import (
    AGENT_NODE,
    AgentGraph,
    out_of_time,
    state_values,
    stream_agent_text,
    unanswered_calls_closed,
)
from agent.state import AgentState, check_version
from agent.threads import thread_config
from infra import telemetry
from infra.db import Conn, Pool
from infra.settings import Settings
from infra.store import branches
from infra.store.checkpoints import copy_new_checkpoints, durable_saver, load_latest_into_memory
from infra.store.heads import RECENT_HEADS, Head, load_active_into_memory, seed_active
from infra.store.history_cache import HISTORY
from infra.store.messages import MessageMetadata
from infra.store.turn_memory import TurnMemory
from turns.assistants import GRAPHS
from turns.context import record_sources, unheard
from turns.turn import Turn


@dataclass(frozen=True)
class Run:
    """A turn's graph on an in-memory copy of its thread."""

    graph: AgentGraph
    memory: InMemorySaver
    known: str | None  # the seeded checkpoint's id; None for a new thread
    config: RunnableConfig
    model: str  # `provider:model`, or `scripted`
    # The branch the turn continues, or the one its fork opens (infra/store/branches.py).
    branch: str = branches.MAIN_BRANCH
    # What the other voices of the chat said that the thread has not seen (turns/context.py):
    # the opening gives it before the user's message.
    heard: tuple[HumanMessage, ...] = ()
    # The head it was seeded with, as loaded: its opening reads it, not the seeded copy again.
    head: Head | None = None
    # Its text from its opening, when the run began ahead of its start (turns/ahead.py).
    ahead: AsyncIterator[str] | None = None

    async def state(self) -> StateSnapshot:
        return await self.graph.aget_state(self.config)

    async def text(self, graph_input: AgentState | None, deadline: float) -> AsyncIterator[str]:
        """Run to the next tool boundary or the end, yielding the model's text as it streams.

        Should the answer still stream at `deadline` (the event loop's clock), it stops there:
        what was shown becomes the answer, marked as cut short for time, and the run ends
        cleanly instead of being killed by the platform mid-write and run again. Traced as the
        GenAI `chat` span of the model call, with its usage.
        """
        started = time.perf_counter()
        span = telemetry.tracer.start_span(
            f"chat {self.model}",
            kind=SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "chat", **telemetry.model_attributes(self.model)},
        )
        first = True
        try:
            async for text in self._text_until(graph_input, deadline):
                if first:
                    first = False
                    span.set_attribute(
                        "gen_ai.response.time_to_first_chunk", telemetry.since(started)
                    )
                yield text
            if telemetry.enabled():
                usage = _last_usage(await self.state())
                if usage is not None:
                    span.set_attribute("gen_ai.usage.input_tokens", usage["input_tokens"])
                    span.set_attribute("gen_ai.usage.output_tokens", usage["output_tokens"])
                telemetry.record_usage(self.model, usage, telemetry.since(started))
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            raise
        finally:
            span.end()

    async def _text_until(
        self, graph_input: AgentState | None, deadline: float
    ) -> AsyncIterator[str]:
        stream = stream_agent_text(self.graph, graph_input, self.config)
        shown: list[str] = []
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        text = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    break
                shown.append(text)
                yield text
        finally:
            await stream.aclose()
        await self.graph.aupdate_state(self.config, out_of_time("".join(shown)), as_node=AGENT_NODE)


def _last_usage(state: StateSnapshot) -> UsageMetadata | None:
    """What the run's last model call reported it used."""
    messages = state.values.get("messages", [])
    last = messages[-1] if messages else None
    return last.usage_metadata if isinstance(last, AIMessage) else None


async def load_run(
    pool: Pool,
    turn: Turn,
    assistant: Assistant,
    settings: Settings,
    *,
    opens: bool = True,
    read: dict[str, Any] | None = None,
) -> Run:
    """The turn's graph on the head of the chat's active branch (`read` by the turn's start,
    else read here); for a fork (an edit, a reply answered again), on the checkpoint the
    replaced turn started from (none when it began the thread). A later round (not `opens`)
    continues the thread's latest checkpoint."""
    memory = TurnMemory()
    edit = turn.edit if opens else None  # a later round continues the turn's own checkpoints
    durable = durable_saver(pool, cache=HISTORY)
    known, branch, head = None, branches.MAIN_BRANCH, None
    with telemetry.tracer.start_as_current_span("load history"):
        if opens and edit is None:  # the active branch and its head, in one round trip
            head = await (
                seed_active(durable, memory, read, turn.thread_id)
                if read is not None
                else load_active_into_memory(
                    durable, memory, turn.chat_id, turn.assistant_id, turn.thread_id
                )
            )
            known, branch = head.checkpoint_id, head.branch
        elif edit is None or edit.base_checkpoint_id is not None:
            base = edit.base_checkpoint_id if edit is not None else None
            known = await load_latest_into_memory(durable, memory, turn.thread_id, base)
        if edit is not None:
            # Named after its first message: the replacement of the edited one, or the new reply.
            branch = str(turn.reply_id if edit.regenerate else turn.user_message_id)
    run = run_on(memory, turn, assistant, settings, known=known, branch=branch, head=head)
    return await hear(pool, turn, run) if opens else run


def run_on(
    memory: InMemorySaver,
    turn: Turn,
    assistant: Assistant,
    settings: Settings,
    *,
    known: str | None,
    branch: str,
    head: Head | None,
    callbacks: Sequence[BaseCallbackHandler] = (),
) -> Run:
    """The turn's graph on `memory`, seeded with `known` (`head`, as loaded) on `branch`."""
    config = thread_config(turn.thread_id)
    if turn.run_id:
        config["run_id"] = uuid.UUID(turn.run_id)
    if callbacks:
        config["callbacks"] = list(callbacks)
    graph = _graph(turn, assistant, memory, settings)
    model = str(turn.model_spec.get("model", ""))
    return Run(graph, memory, known, config, model, branch, head=head)


async def hear(pool: Pool, turn: Turn, run: Run) -> Run:
    """`run`, given what the chat's other voices said that its thread has not heard
    (turns/context.py); as it is for a turn that hears no one."""
    if not turn.assistant_names:
        return run
    heard = await unheard(pool, turn, (await _seeded(run))[0])
    return replace(run, heard=tuple(heard))


async def durable_state(
    pool: Pool, turn: Turn, assistant: Assistant, settings: Settings
) -> StateSnapshot:
    """The thread's head as stored: what a background job plans from and finalizes."""
    graph = _graph(turn, assistant, durable_saver(pool), settings)
    return await graph.aget_state(thread_config(turn.thread_id))


def _graph(
    turn: Turn, assistant: Assistant, saver: BaseCheckpointSaver[Any], settings: Settings
) -> AgentGraph:
    """The assistant's graph for the turn's model, bound to `saver`."""
    graph = GRAPHS.graph(
        assistant,
        turn.model_spec,
        max_tool_rounds=settings.max_tool_rounds,
        max_output_tokens=settings.max_turn_output_tokens,
        model_options=settings.model_options(str(turn.model_spec.get("model", ""))),
    )
    return graph.copy(update={"checkpointer": saver})


def began(state: StateSnapshot, turn: Turn) -> bool:
    """Whether `state`'s thread holds the turn's message: a round that opened it is stored."""
    if turn.user_message_id is None:
        return False
    message_id = str(turn.user_message_id)
    return any(m.id == message_id for m in state_values(state).get("messages", []))


async def opening(run: Run, turn: Turn) -> AgentState:
    """The input that begins the turn: the user's message, after answers to any calls that a
    canceled job never ran (a model must see every call answered) and what the chat's other
    voices said that the thread has not seen."""
    before, metadata, checkpoint_id = await _seeded(run)
    check_version(metadata, checkpoint_id)
    message = HumanMessage(content=turn.content or "", id=str(turn.user_message_id))
    messages: list[AnyMessage] = [
        *unanswered_calls_closed(before),
        *run.heard,
        message,
    ]
    # An instruction given on resuming the turn before is that turn's only.
    return {"messages": messages, "instruction": None}


async def store_run(conn: Conn, run: Run, turn: Turn, *, opened: bool) -> MessageMetadata:
    """The run's new checkpoints, in `conn`'s transaction (the caller holds the job fence), and
    the new head of the turn's branch.

    A run that `opened` the turn also marks the user's message with the checkpoint it began
    from and its branch (a fork opens one and makes it active); the reply's marks are returned
    for the caller to store: the head checkpoint, the one the turn began from and the branch
    (empty for a later round)."""
    newest = await copy_new_checkpoints(
        run.memory, durable_saver(conn), turn.thread_id, known=run.known
    )
    head = None if newest is None else str(newest.checkpoint["id"])
    if newest is not None:
        RECENT_HEADS.remember(run.branch, newest)  # the next turn's likeliest head
    if not opened or turn.user_message_id is None:
        await branches.advance_head(conn, turn.reply_id, head)
        return {}
    await branches.record_turn(
        conn,
        chat_id=turn.chat_id,
        assistant_id=turn.assistant_id,
        message_id=turn.user_message_id,
        reply_id=turn.reply_id,
        branch=run.branch,
        base_checkpoint_id=run.known,
        head=head,
        edit=turn.edit,
        marks_message=turn.owns_message,
        restale=turn.replaces is not None,
    )
    await record_sources(conn, turn, run.heard)
    return {"checkpointId": head, "baseCheckpointId": run.known, "branchId": run.branch}


async def _seeded(run: Run) -> tuple[Sequence[AnyMessage], Mapping[str, Any] | None, str | None]:
    """The messages, metadata and id of the checkpoint `run` was seeded with: as loaded when
    the run has them, else read from its in-memory copy (decoding every message again)."""
    if run.head is not None and run.head.messages is not None:
        return run.head.messages, run.head.metadata, run.head.checkpoint_id
    state = await run.state()
    checkpoint_id = state.config.get("configurable", {}).get("checkpoint_id")
    return state_values(state).get("messages", []), state.metadata, checkpoint_id
