"""A provider that answers differently each time it is asked, as a real model does at any
temperature above zero: a request that is sent again (a round run again after its stream was
cut, its server killed, its database gone) gets another answer, not the same one.

    fake.vary(Varying(first=Reply(text=["Let me check."], tool_calls=[ToolCall("calc", ...)]),
                      faults={1: CutStream(after=5)}))

Request `n` (counting the fake's requests from 0) gets `first` when `n` is 0 and it is given,
else the user's last words retold in wording `n` of `WORDINGS` (round robin): each one another
length and another start. `faults` puts a fault on the requests it names.

Not reproduced: anything a model's variation depends on (temperature, seeds, the messages
sent); two wordings are never alike, whereas a real model may well say the same twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tests.fake_providers.script import Fault, Reply, last_user_text

# By request number, round robin: a long answer, a short one, one in between.
WORDINGS = (
    'You wrote "{said}". Taking it from the top: the answer is the same, said another way.',
    'Here is my answer to "{said}": I read it twice, and it asks for a careful reply, which'
    " follows in full, point by point, with every step shown.",
    'On "{said}": short answer, yes.',
)


@dataclass(frozen=True)
class Varying:
    """The answer for request `n`: `first` for request 0 if given, else wording `n` retold;
    with `faults[n]` if there is one."""

    first: Reply | None = None
    faults: Mapping[int, Fault] = field(default_factory=dict)
    # Between the retold words: a model's pace, so that drafts are written as it streams.
    chunk_delay_ms: float = 0

    def __call__(self, n: int, body: Mapping[str, Any]) -> Reply:
        if n == 0 and self.first is not None:
            reply = self.first
        else:
            reply = replace(retold(n, body), chunk_delay_ms=self.chunk_delay_ms)
        fault = self.faults.get(n)
        return replace(reply, fault=fault) if fault is not None else reply


def retold(n: int, body: Mapping[str, Any]) -> Reply:
    """The user's last words in wording `n`, streamed word by word."""
    text = WORDINGS[n % len(WORDINGS)].format(said=last_user_text(body))
    words = text.split(" ")
    return Reply(text=[w if i == len(words) - 1 else w + " " for i, w in enumerate(words)])
