"""A turn's stream hands its response the events emitted together as one batch, one write
(turns/streaming.py), and what comes alone, alone."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from turns.quick import Emit
from turns.streaming import _relay


async def test_events_emitted_together_come_as_one_batch_and_the_first_alone() -> None:
    first_sent = asyncio.Event()

    async def turn(emit: Emit) -> None:
        await emit("token", {"text": "a"})
        await first_sent.wait()  # the response took the first token before more came
        for text in "bcd":
            await emit("token", {"text": text})
        await emit("done", {"status": "completed"})

    stream = _relay(set(), turn)
    batches: list[list[tuple[str, Mapping[str, object]]]] = []
    async for batch in stream.events:
        batches.append(batch)
        first_sent.set()
    assert [[(e, dict(d)) for e, d in b] for b in batches] == [
        [("token", {"text": "a"})],
        [
            ("token", {"text": "b"}),
            ("token", {"text": "c"}),
            ("token", {"text": "d"}),
            ("done", {"status": "completed"}),
        ],
    ]
