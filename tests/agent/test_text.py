"""Visible text from every content shape the providers stream."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from agent.text import visible_text


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        # OpenAI Chat Completions: a string.
        (AIMessageChunk(content="Hello"), "Hello"),
        # Anthropic: a text block delta, as langchain-anthropic streams it.
        (AIMessageChunk(content=[{"type": "text", "text": "Hel", "index": 0}]), "Hel"),
        # Thinking is not answer text.
        (
            AIMessageChunk(
                content=[
                    {"type": "thinking", "thinking": "the user wants", "index": 0},
                    {"type": "text", "text": "Sure.", "index": 1},
                ]
            ),
            "Sure.",
        ),
        # A tool call's argument fragment is not text either.
        (
            AIMessageChunk(
                content=[{"type": "input_json_delta", "partial_json": '{"in', "index": 1}]
            ),
            "",
        ),
        # A whole message of blocks: its text blocks, in order.
        (
            AIMessage(
                content=[
                    {"type": "text", "text": "Let me check. "},
                    {"type": "tool_use", "id": "t1", "name": "calc", "input": {}},
                    {"type": "text", "text": "Done."},
                ]
            ),
            "Let me check. Done.",
        ),
    ],
)
def test_only_text_blocks_are_shown(message: BaseMessage, shown: str) -> None:
    assert visible_text(message) == shown
