"""First token through Handoff against the same provider called directly, for each provider.

The provider is tests/fake_providers, which streams each API's wire format and waits 200 ms
before its first chunk, like a fast real model; it runs in a child process, and so does the
Handoff stack (`MODEL=openai:…` or `anthropic:…`, the real provider packages, pointed at the
fake). The direct side is the same provider package in this process, streaming the same
question. Runs are interleaved, so a noisy moment of the machine lands on both sides alike.

    python3 -m uv run python -m bench.providers --runs 50
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
import uuid
from collections.abc import Sequence

import httpx
from langchain_core.language_models import BaseChatModel

from agent.model import create_model
from agent.text import visible_text
from bench.sse import client, post_stream
from bench.stack import PROVIDER_FIRST_CHUNK_MS, child_server, create_chats
from bench.stats import Table, ms, p50, p95
from tests.databases import fresh_database, migrated_template, resolve_server_url
from tests.support import token_for

MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-haiku-4-5"}
QUESTION = "What is the fastest way to get a first token on the screen?"
KEY = "bench-key"


async def direct_first_token(model: BaseChatModel) -> float:
    """Seconds from the call to the first visible text, reading the stream to its end."""
    sent = time.perf_counter()
    first = None
    async for chunk in model.astream(QUESTION):
        if first is None and visible_text(chunk):
            first = time.perf_counter() - sent
    if first is None:
        raise RuntimeError("the provider streamed no text")
    return first


async def handoff_first_token(http: httpx.AsyncClient, token: str, chat: uuid.UUID) -> float:
    """Seconds from the request to its first `token` event, reading the stream to its end."""
    body = {"chatId": str(chat), "content": QUESTION}
    stream = await post_stream(
        http, "/api/chat/respond", body, {"Authorization": f"Bearer {token}"}
    )
    first = stream.first("token")
    if stream.status != 200 or first is None:
        raise RuntimeError(f"handoff: no token (status {stream.status})")
    return first.at - stream.sent


async def measure(database_url: str, runs: int) -> Table:
    table = Table(
        f"First token against the provider called directly ({PROVIDER_FIRST_CHUNK_MS} ms to its"
        " first chunk)",
        ("provider", "runs", "direct p50 ms", "Handoff p50 ms", "added p50 ms", "added p95 ms"),
    )
    async with child_server("providers") as fake:
        for provider, name in MODELS.items():
            base = fake + "/v1" if provider == "openai" else fake
            settings = {
                "model": name,
                f"{provider}_base_url": base,
                f"{provider}_api_key": KEY,
                "scripted_token_delay_ms": "0",
            }
            direct = create_model(name, options={"api_key": KEY, "base_url": base})
            user = uuid.uuid4()
            token = token_for(user, exp=int(time.time()) + 3600)
            # A chat per turn: each first token comes from the same short history.
            chats = await create_chats(database_url, user, runs + 1)
            async with (
                child_server("handoff", database_url, **settings) as origin,
                # One connection each, kept alive, as the direct side's client keeps its own.
                client(origin) as http,
            ):
                await handoff_first_token(http, token, chats[-1])  # warm up both
                await direct_first_token(direct)
                sides: dict[str, list[float]] = {"direct": [], "handoff": []}
                for chat in chats[:runs]:
                    sides["direct"].append(await direct_first_token(direct))
                    sides["handoff"].append(await handoff_first_token(http, token, chat))
            added = [h - d for h, d in zip(sides["handoff"], sides["direct"], strict=True)]
            table.add(
                provider,
                runs,
                ms(p50(sides["direct"])),
                ms(p50(sides["handoff"])),
                ms(p50(added)),
                ms(p95(added)),
            )
    table.notes.append(
        "Added: each Handoff run minus the direct run just before it. Handoff's first token"
        " also pays for verifying the JWT, storing the user's message with its job slot and"
        " reading the thread's checkpoint (in parallel with the store), then SSE framing."
    )
    return table


async def run(runs: int) -> str:
    server = resolve_server_url()
    async with migrated_template(server) as template, fresh_database(server, template) as url:
        return (await measure(url, runs)).render()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="turns per side and provider")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    print(asyncio.run(run(args.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
