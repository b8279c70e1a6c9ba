"""An edit's cascade through the real OpenAI and Anthropic packages, against a provider that
answers differently each time it is asked (tests/fake_providers/varying.py): each dependent is
regenerated once, hears the edit's new text, and gets a new answer of its own."""

from __future__ import annotations

import uuid

import pytest

from tests.fake_providers import serve_fake_providers
from tests.fake_providers.varying import Varying
from tests.functions.test_cascade import (
    cascade_row,
    chain,
    edit_first,
    replaced,
    replies_in,
)
from tests.support import fetch

MODELS = ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"]


@pytest.mark.parametrize("model", MODELS)
async def test_a_cascade_through_a_provider_package(database_url: str, model: str) -> None:
    async with serve_fake_providers() as fake:
        fake.vary(Varying())
        settings = {
            "model": model,
            "openai_base_url": fake.openai_base_url,
            "openai_api_key": "test-key",
            "anthropic_base_url": fake.anthropic_base_url,
            "anthropic_api_key": "test-key",
        }
        async with chain(database_url, length=3, **settings) as c:
            asked = len(fake.requests)
            await edit_first(c)
            done = await cascade_row(database_url, "completed")
            await c.stack.executor.wait_idle()
            by = await replaced(database_url, c.replies)
            total = await replies_in(database_url, c.chat_id)
            rows = await fetch(
                database_url,
                "select id, content, status from message where id = any(%s)",
                [uuid.UUID(r) for r in c.replies] + [uuid.UUID(str(v)) for v in by.values() if v],
            )
        sent = [str(r.body) for r in fake.requests[asked:]]
    content = {str(r["id"]): (r["content"], r["status"]) for r in rows}
    # THEN the three dependents are regenerated once each, and completed with new answers
    assert done["regenerated"] == 3
    assert total == 1 + 3 + 1 + 3
    for old in c.replies:
        new = str(by[old])
        assert content[new][1] == "completed"
        assert content[new][0] != content[old][0]
    # AND the edit's new text reached the provider in the regenerated turns (Beta's first one
    # hears it as the chat's other voice), one request per regenerated turn and the edit's
    assert len(sent) == 1 + 3
    assert sum("start anew" in body for body in sent) >= 2
