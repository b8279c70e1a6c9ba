"""The agent graph as the LangGraph server loads it: same graph, same zero-delay scripted model.

The server brings its own checkpointer and takes `interrupt_before` per run, so the graph is
compiled without either. Loaded by `langgraph dev` in the bench's own environment.
"""

from __future__ import annotations

from agent.graph import build_agent_graph
from agent.model import ScriptedChatModel
from demo.tools import demo_tools

graph = build_agent_graph(
    ScriptedChatModel(token_delay_ms=0), demo_tools(), None, interrupt_before_tools=False
)
