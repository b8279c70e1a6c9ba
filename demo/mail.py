"""The demo's mail service, simulated: nothing leaves the process.

It keeps each email it sends under the idempotency key its sender gave, as an email API that
takes one does (Resend's `Idempotency-Key`: a send repeated with a key seen in the last 24 hours
sends nothing and answers with the first send's email). `send_email` (demo/tools.py) gives its
tool call's id, so a call that runs twice, because the process died after the send and before
its result was stored, sends one email.

What it does not reproduce: the keys live in this process only, where a real service keeps them
for every sender of the account; the newest `KEPT_KEYS` are kept, for no set time; a send that
arrives while another with its key is in flight is not refused (each runs to completion here).
"""

from __future__ import annotations

import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass

KEPT_KEYS = 10_000


@dataclass(frozen=True)
class Email:
    """An email as sent, with the id the service gave it."""

    id: str
    to: str
    subject: str
    body: str


class SimulatedMailer:
    """Sends (records) each email once per idempotency key."""

    def __init__(self) -> None:
        self._sent: OrderedDict[str, Email] = OrderedDict()
        self._requests: Counter[str] = Counter()

    def send(self, *, idempotency_key: str, to: str, subject: str, body: str) -> Email:
        """The email sent under `idempotency_key`: sent now, or by an earlier request."""
        self._requests[idempotency_key] += 1
        if (sent := self._sent.get(idempotency_key)) is not None:
            return sent
        email = Email(id=str(uuid.uuid4()), to=to, subject=subject, body=body)
        self._sent[idempotency_key] = email
        while len(self._sent) > KEPT_KEYS:
            forgotten, _ = self._sent.popitem(last=False)
            del self._requests[forgotten]
        return email

    def sent_to(self, to: str) -> list[Email]:
        """The emails sent to `to` (among those whose keys are kept), oldest first."""
        return [e for e in self._sent.values() if e.to == to]

    def requests(self, idempotency_key: str) -> int:
        """How many sends came with `idempotency_key`, the repeats included."""
        return self._requests[idempotency_key]


MAILER = SimulatedMailer()
