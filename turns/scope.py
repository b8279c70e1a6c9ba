"""What every step body of a background job reads: whose job it is, and what it may use.

The job's units (turns/job.py: claim, pause, finalize; turns/tool_calls.py: running the tools;
turns/prompts.py: what the job puts to the user) are each a `JobScope`, so a step body reads only
what its unit and its arguments hold, and a replay sees what the first run saw.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.tools import BaseTool

from agent.assistants import Assistant
from infra.db import Conn
from infra.runtime import Services
from infra.store import jobs
from turns.turn import Turn


@dataclass(frozen=True)
class JobScope:
    """The job `job_key`, run by the Inngest run `run_id`, for `turn` of `assistant`."""

    services: Services
    assistant: Assistant
    job_key: str
    run_id: str
    turn: Turn

    @property
    def log(self) -> dict[str, str]:
        return {"chat_id": str(self.turn.chat_id), "job_id": self.job_key}

    def tool(self, name: str) -> BaseTool | None:
        return next((t for t in self.assistant.tools if t.name == name), None)

    async def holds(self, conn: Conn) -> bool:
        """Whether this run still holds the job (the fence a cancel waits for)."""
        return await jobs.hold(conn, self.job_key, self.run_id)
