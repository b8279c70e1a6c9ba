"""What the user should see for a state, wherever the agent is running."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from langchain_core.messages import AIMessage

from agent.graph import current_turn
from agent.state import AgentState, AgentStatus, CutShort, ToolInvocation
from agent.text import visible_text

PARAGRAPH_BREAK = "\n\n"
APOLOGY = "Sorry, something went wrong while finishing this answer. Please try again."
# A background job whose assistant this deployment no longer defines.
ASSISTANT_GONE = (
    "Sorry, this answer cannot be finished: the assistant it came from is no longer available."
)
INTERRUPTED = "This answer was stopped: a newer message or a cancel took its place."
# Said after an answer that is not whole, so nobody takes it for the whole answer.
CUT_SHORT_TEXT: dict[CutShort, str] = {
    "incomplete": "(This answer was cut short: the model stopped before finishing. Please ask"
    " again.)",
    "length": "(This answer was cut short: it reached the length limit.)",
    "content_filter": "(This answer was stopped by the model provider's content filter.)",
    "time": "(This answer was interrupted: it took longer than one answer may take. Please ask"
    " again, perhaps for less at once.)",
}
# Said after what a reply had shown when the server streaming it stopped (turns/start.py).
STOPPED_TEXT = (
    "(This answer was interrupted: the server writing it stopped. Please send your message again.)"
)
# Said between what an attempt of a background round had shown and the answer of the attempt
# that ran it again, when that answer does not continue what was shown (turns/shown.py).
RESTARTED_TEXT = "(The answer was interrupted here and started over.)"
# The key, in an answer's `additional_kwargs`, of the text shown before it restarted:
# langchain-openai and langchain-anthropic send no key of it they do not know, so the model
# reads its own answer only (tests/functions/test_what_was_shown.py).
SHOWN_BEFORE = "shown_before"
INCOMPATIBLE_VERSION = (
    "Sorry, this conversation was saved by a different version of the assistant and cannot be"
    " continued. Please start a new chat."
)


class ProgressEntry(TypedDict):
    """A tool call as subscribers see it, in `metadata.snapshot.progress`."""

    id: str
    name: str
    status: str
    note: NotRequired[str]


class SnapshotMetadata(TypedDict):
    """What a message's `metadata.snapshot` holds: the agent's status and its tools' progress."""

    status: AgentStatus
    progress: list[ProgressEntry]
    cutShort: NotRequired[CutShort]


class SnapshotJson(SnapshotMetadata):
    """The snapshot with its text, as the stream's `snapshot` events carry it."""

    text: str


@dataclass(frozen=True)
class ToolProgress:
    id: str
    name: str
    status: str
    # Said about the call's result, e.g. that its output was cut short.
    note: str | None = None

    def to_json(self) -> ProgressEntry:
        shown = ProgressEntry(id=self.id, name=self.name, status=self.status)
        if self.note:
            shown["note"] = self.note
        return shown


@dataclass(frozen=True)
class AgentSnapshot:
    """UI fields: the best-known assistant text of the current turn, status and tool progress."""

    text: str
    status: AgentStatus
    progress: tuple[ToolProgress, ...] = field(default_factory=tuple)
    cut_short: CutShort | None = None

    def to_json(self) -> SnapshotJson:
        return {"text": self.text, **self.to_metadata()}

    def to_metadata(self) -> SnapshotMetadata:
        """What a message's `metadata.snapshot` holds: the text is its content or draft."""
        shown = SnapshotMetadata(status=self.status, progress=[p.to_json() for p in self.progress])
        if self.cut_short is not None:
            shown["cutShort"] = self.cut_short
        return shown


def turn_text(state: AgentState) -> str:
    """The assistant text of the current turn: each AI message's text as it was shown, in
    order."""
    texts = [shown_text(m) for m in current_turn(state["messages"]) if isinstance(m, AIMessage)]
    return join_paragraphs(texts)


def shown_text(message: AIMessage) -> str:
    """What the user was shown of an answer: its text, after what an earlier attempt of it
    showed and the note that it started over, if it did (`restarted`)."""
    before = message.additional_kwargs.get(SHOWN_BEFORE)
    text = visible_text(message)
    return restarted_text(before, text) if isinstance(before, str) else text


def restarted_text(before: str, text: str) -> str:
    """`text`, an answer that started over after `before` had been shown."""
    return join_paragraphs([before, RESTARTED_TEXT, text])


def restarted(message: AIMessage, before: str) -> AIMessage:
    """`message`, marked as the answer that started over after `before` had been shown."""
    kwargs = {**message.additional_kwargs, SHOWN_BEFORE: before}
    return message.model_copy(update={"additional_kwargs": kwargs})


def failed_text(shown: str, user_text: str) -> str:
    """A failed reply's text: what it had shown, then the failure's plain words as a note,
    in parentheses as every note after an answer; the words alone when nothing was shown."""
    return join_paragraphs([shown, f"({user_text})"]) if shown else user_text


def join_paragraphs(texts: list[str]) -> str:
    return PARAGRAPH_BREAK.join(t for t in texts if t)


def render_agent_snapshot(state: AgentState) -> AgentSnapshot:
    """Map state to what the user sees: the turn's text, its status and its tools' progress."""
    status: AgentStatus = state.get("status", "streaming")
    invocations: list[ToolInvocation] = state.get("tool_invocations", [])
    turn_ids = {
        c["id"]
        for m in current_turn(state["messages"])
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    }
    progress = tuple(
        ToolProgress(id=inv["id"], name=inv["name"], status=inv["status"], note=inv.get("note"))
        for inv in invocations
        if inv["id"] in turn_ids
    )
    cut = state.get("cut_short")
    text = turn_text(state)
    if cut is not None:
        text = join_paragraphs([text, CUT_SHORT_TEXT[cut]])
    return AgentSnapshot(text=text, status=status, progress=progress, cut_short=cut)
