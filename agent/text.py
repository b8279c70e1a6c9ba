"""The text a person reads in a model's message, whatever shape its content has."""

from __future__ import annotations

from langchain_core.messages import BaseMessage


def visible_text(message: BaseMessage) -> str:
    """The answer text of a message or a streamed chunk.

    Providers send content as a string (OpenAI Chat Completions) or as a list of content blocks
    (Anthropic, OpenAI's Responses API, Bedrock Converse, Gemini). Only `text` blocks are answer
    text: reasoning or thinking, tool-call argument fragments and other blocks are not shown.
    """
    return str(message.text)
