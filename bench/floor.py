"""The floor: the same graph and zero-delay scripted model behind a bare streaming endpoint.

No auth, no database, no history, the graph compiled once: what streaming the agent costs
before the quick path adds anything. The quick path's first token is measured against this.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from langchain_core.messages import AIMessageChunk, HumanMessage
from pydantic import BaseModel

from agent.graph import AGENT_NODE, build_agent_graph
from agent.model import ScriptedChatModel
from demo.tools import demo_tools
from handlers.sse import sse

FLOOR_PATH = "/floor"


class FloorRequest(BaseModel):
    content: str


def create_floor_app() -> FastAPI:
    graph = build_agent_graph(ScriptedChatModel(token_delay_ms=0), demo_tools(), None)
    app = FastAPI()

    @app.post(FLOOR_PATH)
    async def floor(body: FloorRequest) -> StreamingResponse:
        async def stream() -> AsyncIterator[bytes]:
            graph_input: Any = {"messages": [HumanMessage(content=body.content)]}
            async for chunk, meta in graph.astream(graph_input, stream_mode="messages"):
                if (
                    isinstance(meta, dict)
                    and meta.get("langgraph_node") == AGENT_NODE
                    and isinstance(chunk, AIMessageChunk)
                    and isinstance(chunk.content, str)
                    and chunk.content
                ):
                    yield sse("token", {"text": chunk.content})
            yield sse("done", {"status": "completed"})

        return StreamingResponse(stream(), media_type="text/event-stream")

    return app
