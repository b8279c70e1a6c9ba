"""What a background round shows when an attempt before it had shown text the thread never got.

An attempt of a round streams into the reply's draft and may fail before it stores the round (the
provider's stream cut, the server killed, the database gone): the step runs again, and the model,
asked again, need not say the same. The page must not silently swap one answer for another, so
the attempt that runs again compares its answer with what was shown after the text before the
round:

- while its answer agrees with what was shown, the draft keeps showing that and goes on from its
  end: the answer continues the text shown (a model that repeats itself changes nothing);
- once its answer differs from it, or ends short of it, the answer started over: the draft keeps
  what was shown, then says so (agent.snapshot.RESTARTED_TEXT), then shows the new answer; the
  round's message is marked with what was shown before it (agent.snapshot.restarted), so that the
  reply's final text, rendered from the thread, is the text the draft showed.

The model reads its own answer only: what an earlier attempt showed stays out of what it is sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import AIMessage

from agent.graph import AGENT_NODE
from agent.snapshot import restarted, restarted_text
from agent.state import AgentState
from infra.store.drafts import DraftWriter
from turns.engine import Run


@dataclass
class RoundText:
    """The draft of a round's attempt: `before`, the reply's text before the round (with its
    paragraph break); `earlier`, what an earlier attempt showed after it ("" when none did)."""

    before: str
    earlier: str
    answer: str = ""
    restarted: bool = False

    @classmethod
    def after(cls, before: str, stored: str) -> RoundText:
        """The round's text, the stored draft being `stored`: what it holds past `before` is
        what an earlier attempt showed (a draft of an earlier round holds nothing past it)."""
        earlier = stored[len(before) :] if stored.startswith(before) else ""
        return cls(before, earlier)

    def add(self, text: str) -> None:
        """The answer streamed `text`."""
        self.answer += text
        if not (self.earlier.startswith(self.answer) or self.answer.startswith(self.earlier)):
            self.restarted = True

    def end(self) -> None:
        """The answer ended: one short of what was shown started over too."""
        if not self.answer.startswith(self.earlier):
            self.restarted = True

    @property
    def draft(self) -> str:
        """What the draft shows now."""
        if self.restarted:
            return self.before + restarted_text(self.earlier, self.answer)
        return self.before + max(self.earlier, self.answer, key=len)


async def stream_round(
    run: Run, graph_input: AgentState | None, writer: DraftWriter, deadline: float
) -> RoundText:
    """Stream the round's answer into `writer` (started, its text the reply's text before the
    round) until `deadline`, as `RoundText` says, and mark the answer if it started over. A
    failed attempt leaves the draft as subscribers saw it, with nothing pending."""
    shown = RoundText.after(writer.text, writer.stored)
    earlier_ids = {m.id for m in (await run.state()).values.get("messages", [])}
    try:
        async for text in run.text(graph_input, deadline):
            shown.add(text)
            await writer.show(shown.draft)
        shown.end()
        await writer.show(shown.draft)
        await writer.flush()
    finally:
        writer.discard()
    if shown.restarted:
        await _mark_restart(run, earlier_ids, shown.earlier)
    return shown


async def _mark_restart(run: Run, earlier_ids: set[str | None], shown: str) -> None:
    """Mark the round's answer (the last AI message not among `earlier_ids`) as the one that
    started over after `shown`, as the agent's own update: the thread goes on as it would."""
    messages = (await run.state()).values.get("messages", [])
    answers = [m for m in messages if isinstance(m, AIMessage) and m.id not in earlier_ids]
    if answers:
        update = {"messages": [restarted(answers[-1], shown)]}
        await run.graph.aupdate_state(run.config, update, as_node=AGENT_NODE)
