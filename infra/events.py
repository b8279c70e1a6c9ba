"""Inngest events: their names, the client that sends them, and sending them.

The `chat/tool_handoff` event's data is a turn's (turns/turn.py). The Inngest SDK (with httpx,
its HTTP client) is imported where an event is made or a client built, not with this module:
the respond app sends its first event after its first tokens (`LazyEventClient`), so a cold
start does not wait for the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Protocol, TypedDict, cast
from uuid import UUID

from pydantic import SecretStr

from infra.settings import Settings

if TYPE_CHECKING:
    import inngest

logger = logging.getLogger(__name__)

HANDOFF_EVENT = "chat/tool_handoff"
# data: CancelData: the run whose job has that root message stops.
CANCEL_EVENT = "chat/cancel"
# data: ApprovalData: wakes the run waiting on that call; the decision itself is read from the
# message (infra/store/approvals.py).
APPROVAL_EVENT = "chat/tool_approval"
# data: AnswerData: wakes the run waiting on that question; the answer is read from the message
# (infra/store/questions.py).
ANSWER_EVENT = "chat/user_answer"
# data: ResumeData: wakes the paused run of the job whose reply that is; the job row says whether
# it was resumed and with which instruction (infra/store/pauses.py).
RESUME_EVENT = "chat/resume"
# data: CascadeData, ids only: regenerate the replies that depend on an edit (functions/cascade.py);
# its id is the cascade's, so a re-send starts nothing twice.
CASCADE_EVENT = "chat/cascade.requested"
# data: CascadeData: wakes the cascade waiting on its card; the decision is read from its row.
CASCADE_DECISION_EVENT = "chat/cascade.decision"
# data: CascadeData: stops the cascade before its next regeneration (its row says so already).
CASCADE_CANCEL_EVENT = "chat/cascade.cancel"
# data: ReplyEndedData: a regenerated reply's job ended; wakes the cascade waiting for it.
REPLY_ENDED_EVENT = "chat/reply.ended"


class TurnPayload(TypedDict):
    """The `chat/tool_handoff` event's data and its job's stored payload: a turn as
    turns/turn.py writes it. Those written by earlier builds may lack the keys not required."""

    chatId: str
    userId: str
    assistantId: str
    threadId: str
    rootMessageId: str  # the reply
    checkpointId: NotRequired[str]
    modelConfig: dict[str, Any]  # the model spec (agent/model.py)
    kind: NotRequired[Literal["handoff", "turn"]]
    userMessageId: NotRequired[str | None]
    content: NotRequired[str | None]
    trace: NotRequired[dict[str, str]]
    handedOffAt: NotRequired[float | None]
    assistantNames: NotRequired[dict[str, str]]
    ownsMessage: NotRequired[bool]
    edit: NotRequired[EditPayload]
    context: NotRequired[list[str]]  # a regenerated dependent's context, message ids in order
    replaces: NotRequired[str]  # the reply a regenerated dependent replaces


class EditPayload(TypedDict):
    """The fork a queued turn makes (infra/store/forks.py `Edit`)."""

    messageId: str  # the user message edited, or answered again
    baseCheckpointId: str | None
    forkedFrom: str  # the message the new branch replaces
    regenerate: bool


class CancelData(TypedDict):
    chatId: str
    assistantId: str
    messageId: str  # the reply of the job whose run stops


class ApprovalData(TypedDict):
    chatId: str
    messageId: str  # the reply that waits
    toolCallId: str


class AnswerData(TypedDict):
    chatId: str
    messageId: str  # the reply that waits
    questionId: str


class ResumeData(TypedDict):
    chatId: str
    messageId: str  # the paused job's reply


class CascadeData(TypedDict):
    chatId: str
    cascadeId: str


class ReplyEndedData(TypedDict):
    chatId: str
    messageId: str  # the reply whose job ended


ControlData = CancelData | ApprovalData | AnswerData | ResumeData | CascadeData | ReplyEndedData


class EventSender(Protocol):
    async def send(self, events: inngest.Event | list[inngest.Event]) -> list[str]: ...


def handoff_event(event_id: str, data: TurnPayload) -> inngest.Event:
    """`id` = the job's idempotency key: Inngest drops a re-send of the same id."""
    import inngest

    return inngest.Event(id=event_id, name=HANDOFF_EVENT, data=_json(data))


async def send_handoff(sender: EventSender, event_id: str, data: TurnPayload) -> None:
    await sender.send(handoff_event(event_id, data))


async def send_cancel(
    sender: EventSender, *, chat_id: UUID, assistant_id: str, reply_id: UUID
) -> None:
    """Stop the run of the job whose reply is `reply_id`. The job already ended in the
    database, so a failed send only means the run stops at its next write instead."""
    data = CancelData(chatId=str(chat_id), assistantId=assistant_id, messageId=str(reply_id))
    await send_control(sender, CANCEL_EVENT, data)


async def send_cascade(sender: EventSender, *, chat_id: UUID, cascade_id: UUID) -> None:
    """Start the cascade `cascade_id`; its event's id is the cascade's, so a re-send (the
    outbox relay's) starts nothing twice. Raises when the send fails: the caller leaves the
    cascade unsent for the relay."""
    import inngest

    data = CascadeData(chatId=str(chat_id), cascadeId=str(cascade_id))
    await sender.send(inngest.Event(id=str(cascade_id), name=CASCADE_EVENT, data=_json(data)))


async def send_control(sender: EventSender, name: str, data: ControlData) -> None:
    """Send an event that stops or wakes a run (`chat/cancel`, `chat/tool_approval`,
    `chat/user_answer`, `chat/resume`), after the database holds what it stands for.

    A failed send is logged, not raised: the user's request has taken effect, and the run finds
    it without the event (at its next write, or when its wait ends: functions/wakes.py).
    """
    import inngest

    try:
        await sender.send(inngest.Event(name=name, data=_json(data)))
    except Exception:
        logger.exception("%s not sent", name, extra={"chat_id": data.get("chatId")})


def _json(data: TurnPayload | ControlData) -> Mapping[str, inngest.JSON]:
    # Every value of these TypedDicts is JSON; mypy cannot see it through a TypedDict's values.
    return cast("Mapping[str, inngest.JSON]", data)


def create_inngest_client(settings: Settings) -> inngest.Inngest:
    """Dev server when INNGEST_DEV is set; otherwise signed production mode, against Inngest
    Cloud or the server at INNGEST_BASE_URL (self-hosted, or the local executor)."""
    import inngest

    origin = settings.inngest_origin
    dev = settings.inngest_is_dev_server
    return inngest.Inngest(
        app_id=settings.inngest_app_id,
        is_production=not dev,
        api_base_url=origin,
        event_api_base_url=origin,
        event_key=_secret(settings.inngest_event_key),
        signing_key=None if dev else _secret(settings.inngest_signing_key),
        logger=logging.getLogger("inngest"),
    )


class LazyEventClient:
    """The respond app's EventSender: the Inngest client made on the first send, which comes
    after a turn's first tokens, so the SDK is not imported before them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: inngest.Inngest | None = None

    def client(self) -> inngest.Inngest:
        if self._client is None:
            self._client = create_inngest_client(self.settings)
        return self._client

    async def send(self, events: inngest.Event | list[inngest.Event]) -> list[str]:
        return await self.client().send(events)


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()
