"""What a background job puts to the user, and what it makes of the reply: a tool call to
approve (infra/store/approvals.py) and a question the model asks (infra/store/questions.py).

Each prompt is three step bodies and a read: `ask_*` commits what the job waits for, `awaits_*`
says whether it still waits (read when a wait ended without its event), `settle_*` gives what
the job goes on with. functions/prompts.py is their order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from agent.display import display_arguments
from agent.tools import asks_user, requires_approval
from infra.store import approvals, questions
from infra.store.approvals import Decision, PendingApproval
from infra.store.questions import PendingQuestion
from infra.store.tool_results import ToolResult, fetch_result
from turns.plan import PlannedCall
from turns.scope import JobScope
from turns.tool_calls import argument_problems, keep_result

# How the job answers a call: the tool runs, after the user's approval, or the user's answer
# is its result.
CallKind = Literal["tool", "approval", "question"]


@dataclass(frozen=True)
class Prompts(JobScope):
    """The prompts of the job's turn, on its reply's metadata."""

    def kind_of(self, call: PlannedCall) -> CallKind:
        """How the call is answered. A call with invalid arguments is put to nobody: its tool
        step gives the model an error result to fix (an e-mail address that is not one)."""
        tool = self.tool(call["name"])
        if tool is None or "args" not in call or argument_problems(tool, call["args"]):
            return "tool"
        if asks_user(tool):
            return "question"
        return "approval" if requires_approval(tool) else "tool"

    async def ask_approval(self, call: PlannedCall, timeout_s: float) -> bool | None:
        """Put the call to the user. True: wait for them. False: decided already (a replay).
        None: the job is no longer this run's."""
        expires = datetime.now(UTC) + timedelta(seconds=timeout_s)
        pending: PendingApproval = {
            "toolCallId": call["id"],
            "name": call["name"],
            "args": call["args"],
            # What a frontend shows: the arguments with nothing hidden (agent/display.py).
            "display": display_arguments(call["args"]),
            "expiresAt": expires.isoformat(),
        }
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await self.holds(conn):
                return None
            return await approvals.ask(conn, self.turn.reply_id, pending)

    async def awaits_approval(self, call: PlannedCall) -> bool:
        """Whether the call still waits for the user's decision (read when a wait ended
        without the event): False once decided, past its time, or the job not this run's."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await self.holds(conn):
                return False
            return await approvals.waiting(conn, self.turn.reply_id, call["id"])

    async def settle_approval(self, call: PlannedCall) -> Decision | None:
        """The user's decision, or a timeout if there is none; None if the job is gone."""
        timed_out = Decision(approved=False, note=None, timed_out=True)
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await self.holds(conn):
                return None
            return await approvals.settle(conn, self.turn.reply_id, call["id"], timed_out)

    async def ask_question(self, call: PlannedCall, timeout_s: float) -> bool | None:
        """Put the model's question to the user. True: wait for them. False: answered already
        (a replay). None: the job is no longer this run's."""
        args = call["args"]
        expires = datetime.now(UTC) + timedelta(seconds=timeout_s)
        pending: PendingQuestion = {
            "questionId": call["id"],
            "question": args["question"],
            "options": list(args["options"]),
            "context": args.get("context", ""),
            "expiresAt": expires.isoformat(),
        }
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await self.holds(conn):
                return None
            return await questions.ask(conn, self.turn.reply_id, pending)

    async def awaits_answer(self, call: PlannedCall) -> bool:
        """Whether the question still waits for the user's answer (read when a wait ended
        without the event): False once answered, past its time, or the job not this run's."""
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await self.holds(conn):
                return False
            return await questions.waiting(conn, self.turn.reply_id, call["id"])

    async def settle_question(self, call: PlannedCall) -> ToolResult | None:
        """The call's result: the user's answer, or that nobody answered in time; stored like
        any tool result. None if the job is gone."""
        stored = await fetch_result(await self.services.pool(), self.turn.thread_id, call["id"])
        if stored is not None:
            return stored
        async with (await self.services.pool()).connection() as conn, conn.transaction():
            if not await self.holds(conn):
                return None
            answer = await questions.settle(conn, self.turn.reply_id, call["id"])
        timeout_s = self.services.settings.question_timeout_s
        result = ToolResult(
            id=call["id"], name=call["name"], content=answer_text(answer, timeout_s)
        )
        return await keep_result(self, result)

    async def refuse_question(self, call: PlannedCall) -> ToolResult:
        """An error result for a question past MAX_QUESTIONS_PER_TURN: nobody is asked."""
        limit = self.services.settings.max_questions_per_turn
        text = (
            f"Error: this question was not put to the user: at most {limit} questions may be"
            " asked in one answer. Go on with your best judgement and say what you assumed."
        )
        error = ToolResult(id=call["id"], name=call["name"], content=text, status="error")
        return await keep_result(self, error)


def answer_text(answer: questions.Answer, timeout_s: float) -> str:
    """What the model reads as the result of its question."""
    if answer["timed_out"] or answer["answer"] is None:
        minutes = f"{timeout_s / 60:g} minutes" if timeout_s >= 60 else f"{timeout_s:g} s"
        return (
            f"The user did not answer within {minutes}. Go on with your best judgement, and say"
            " what you assumed."
        )
    return f"The user answered: {answer['answer']}"
