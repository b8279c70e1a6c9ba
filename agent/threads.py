"""Thread-key policy: every assistant in a chat keeps its own LangGraph thread."""

from __future__ import annotations

import re
from typing import NewType
from uuid import UUID

from langchain_core.runnables import RunnableConfig

from agent.state import SCHEMA_VERSION

ThreadId = NewType("ThreadId", str)

# No ":" so the thread id splits back unambiguously.
ASSISTANT_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def thread_key(chat_id: UUID, assistant_id: str) -> ThreadId:
    """`chat_id:assistant_id`. The root checkpoint_ns stays "" because LangGraph's state API
    reads a non-empty root namespace as a subgraph path."""
    if not ASSISTANT_ID_PATTERN.fullmatch(assistant_id):
        raise ValueError(f"invalid assistant id: {assistant_id!r}")
    return ThreadId(f"{chat_id}:{assistant_id}")


def thread_config(thread_id: ThreadId, **configurable: object) -> RunnableConfig:
    """The config of a thread; every checkpoint written through it records SCHEMA_VERSION."""
    return {
        "configurable": {"thread_id": thread_id, "checkpoint_ns": "", **configurable},
        "metadata": {"schema_version": SCHEMA_VERSION},
    }
