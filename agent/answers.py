"""A model's answer as the agent node takes it: asked again when it ended unfinished before
showing anything, and why it is not whole when the provider says it was cut."""

from __future__ import annotations

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from agent.state import CutShort
from agent.text import visible_text

# A model call that ended without finishing and showed nothing is asked again this often.
MODEL_RETRIES_UNSEEN = 2
# How providers say an answer is whole (OpenAI's finish_reason, Anthropic's stop_reason,
# Gemini's finish_reason, Bedrock's stopReason), and how they say it was cut.
FINISHED = frozenset(
    {"stop", "tool_calls", "function_call", "end_turn", "tool_use", "stop_sequence", "pause_turn",
     "STOP", "FINISH_REASON_UNSPECIFIED"}
)  # fmt: skip
CUT: dict[str, CutShort] = {
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "SAFETY": "content_filter",
    "guardrail_intervened": "content_filter",
}


async def answer(
    bound: Runnable[LanguageModelInput, BaseMessage],
    messages: list[AnyMessage],
    config: RunnableConfig,
) -> tuple[BaseMessage, CutShort | None]:
    """The model's answer, and why it is not whole (None: it is)."""
    response = await bound.ainvoke(messages, config)
    cut = cut_short(response)
    for _ in range(MODEL_RETRIES_UNSEEN):
        if cut is None or visible_text(response):
            break
        # Nothing of it reached anyone: ask again rather than answer with nothing.
        response = await bound.ainvoke(messages, config)
        cut = cut_short(response)
    return response, cut


def cut_short(message: BaseMessage) -> CutShort | None:
    """Why the model's answer is not whole, or None when the provider said it finished."""
    meta = message.response_metadata
    stop = meta.get("finish_reason") or meta.get("stop_reason") or meta.get("stopReason")
    if stop is None:
        return "incomplete"  # the stream ended without the provider saying why
    return None if stop in FINISHED else CUT.get(str(stop))
