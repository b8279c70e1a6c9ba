"""A deployment's own assistants, as docs/assistants.md shows them: a planner whose graph is not
the plain tool loop (a planning node runs before the agent), beside the demo's helper.

The planning node asks the assistant's model for a plan, without tools, and keeps it in the
state (`plan`, a key of its own); Handoff's agent node then answers with the plan before the
thread, as a system note of this turn only.
"""

from __future__ import annotations

from typing import Any, NotRequired

from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph

from agent.assistants import Assistant
from agent.graph import AgentParts, route_after_agent
from agent.state import AgentState
from agent.text import visible_text
from demo.assistants import ASSISTANTS as DEMO
from demo.tools import calc

PLAN_PROMPT = "Write a one-line plan for answering the user's last message."


class PlannedState(AgentState):
    plan: NotRequired[str]


def planned_graph(parts: AgentParts) -> StateGraph[PlannedState, None, PlannedState, PlannedState]:
    """`plan` once per turn, then Handoff's tool loop: `agent`, `tools` while the model calls
    them."""

    async def plan(state: PlannedState, config: RunnableConfig) -> dict[str, Any]:
        asked = [SystemMessage(content=PLAN_PROMPT), *state["messages"]]
        made = await parts.model.ainvoke(asked, config)
        return {"plan": visible_text(made)}

    async def agent(state: PlannedState, config: RunnableConfig) -> dict[str, Any]:
        # The plan is shown to the model before the thread; nothing of it is stored there.
        noted = SystemMessage(content=f"Your plan: {state.get('plan', '')}")
        seen: PlannedState = {**state, "messages": [noted, *state["messages"]]}
        return await parts.agent(seen, config)

    builder = StateGraph(PlannedState)
    builder.add_node("plan", plan)
    builder.add_node("agent", agent)
    builder.add_node("tools", parts.tool_node())
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "agent")
    builder.add_conditional_edges("agent", route_after_agent)
    builder.add_edge("tools", "agent")
    return builder


PLANNER = Assistant(
    id="planner",
    name="Planner",
    description="Plans, then works it out.",
    tools=[calc],
    graph=planned_graph,
)

ASSISTANTS = [*DEMO, PLANNER]
