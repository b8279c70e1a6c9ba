"""A new message's turn, run ahead of its start on the head its thread most likely has.

The head each thread's last run in this process stored is recalled (infra/store/heads.py,
RECENT_HEADS). While `handoff.open_turn` admits the message and reads the thread's head
(turns/opened.py), the turn's graph runs on the recalled one as far as LangGraph's own work
goes before any node: the history seeded, the input applied, the first step's tasks prepared.
`Gate`, a callback, holds every node there, so neither the model nor any code of the
assistant's runs before the start says go.

It goes on when the start took the slot, the database's head is the one it ran on (the same
checkpoint on the same branch, no pending writes) and the turn hears no other voice of the
chat. Else it is dropped, nothing of it seen or stored, and the turn runs on the head as read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.constants import START

from agent.state import checkpoint_schema
from infra.store.checkpoints import seed_memory
from infra.store.heads import RECENT_HEADS, Head
from infra.store.turn_memory import TurnMemory
from turns.begun import drop_task
from turns.engine import Run, opening, run_on
from turns.turn import Turn

if TYPE_CHECKING:
    from turns.streaming import TurnHost

logger = logging.getLogger(__name__)


class Gate(AsyncCallbackHandler):
    """Holds each node of the graph run it is a callback of until `open`."""

    run_inline = True

    def __init__(self) -> None:
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: dict[str, Any] | Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # LangGraph names the node a run belongs to; `__start__` only writes the input.
        node = (metadata or {}).get("langgraph_node")
        if node is not None and node != START:
            await self.opened

    # A node's start is all it holds: the model's tokens and every other event pass it by, and
    # once open, so do the nodes' (each event would otherwise cost a call, per token too).
    ignore_llm = ignore_chat_model = ignore_retry = ignore_agent = ignore_retriever = True
    ignore_custom_event = True

    @property
    def ignore_chain(self) -> bool:
        return self.opened.done()

    def open(self) -> None:
        if not self.opened.done():
            self.opened.set_result(None)


@dataclass(frozen=True)
class Ahead:
    """A turn's run begun ahead of its start, held before its first node."""

    run: Run
    gate: Gate
    first: asyncio.Task[str | None]

    def confirmed_by(self, head: dict[str, Any] | None) -> bool:
        """Whether `head`, `handoff.open_turn`'s, is the one the run began on: the same
        checkpoint on the same branch, written by the same schema version (the opening checked
        the recalled one's)."""
        began = self.run.head.metadata if self.run.head is not None else None
        return (
            head is not None
            and head["checkpoint_id"] == self.run.known
            and head["branch"] == self.run.branch
            and not head["pending_writes"]
            and checkpoint_schema(head["metadata"]) == checkpoint_schema(began)
        )

    def go(self) -> Run:
        """The run, its nodes let go."""
        self.gate.open()
        return self.run

    def drop(self) -> None:
        """Nothing of it is needed: it stops where it is held, before any node."""
        drop_task(self.first)


async def run_ahead(host: TurnHost, turn: Turn) -> Ahead | None:
    """`turn` run ahead on its thread's recalled head, held before its first node; None when
    no head is recalled or the run could not begin (the turn's own start says why)."""
    recalled = RECENT_HEADS.take(turn.thread_id)
    if recalled is None:
        return None
    try:
        return await _ahead(host, turn, *recalled)
    except Exception:
        # Never the turn's failure: it runs on the head its start reads, and says why there.
        logger.warning("could not run the turn ahead", extra=turn.log, exc_info=True)
        return None


async def _ahead(host: TurnHost, turn: Turn, branch: str, stored: CheckpointTuple) -> Ahead:
    settings = host.services.settings
    memory = TurnMemory()
    known = await seed_memory(memory, stored)
    values = stored.checkpoint["channel_values"]
    head = Head(branch, known, values.get("messages", ()), stored.metadata)
    gate = Gate()
    assistant = host.assistants.pick(turn.assistant_id)
    run = run_on(
        memory, turn, assistant, settings, known=known, branch=branch, head=head, callbacks=[gate]
    )
    graph_input = await opening(run, turn)
    deadline = asyncio.get_running_loop().time() + settings.quick_budget_s
    texts = run.text(graph_input, deadline)
    first = asyncio.create_task(_first(texts))
    return Ahead(replace(run, ahead=_after(first, texts)), gate, first)


async def _first(texts: AsyncIterator[str]) -> str | None:
    return await anext(texts, None)


async def _after(first: asyncio.Task[str | None], texts: AsyncIterator[str]) -> AsyncIterator[str]:
    """The run's text: the first part, as the task running ahead gets it, then the rest."""
    text = await first
    if text is None:
        return
    yield text
    async for text in texts:
        yield text
