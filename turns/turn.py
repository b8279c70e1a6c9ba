"""One turn: a user's message and the reply it gets, from the request to the final message."""

from __future__ import annotations

import time
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent.snapshot import AgentSnapshot
from agent.threads import ThreadId
from agent.usage import TurnUsage
from infra.events import TurnPayload
from infra.store.forks import Edit
from infra.store.ids import ChatId, MessageId, UserId
from infra.store.messages import MessageMetadata
from infra.store.usage import Spent


class Turn(BaseModel):
    """A turn as the quick path runs it; its JSON (camelCase) is the job's payload and the
    `chat/tool_handoff` event's data, which the background runs it from.

    `kind` says where the background starts: `handoff` resumes the checkpoint the quick path
    paused at (`checkpointId`); `turn` is a message that waited behind another job, whose whole
    turn the background runs, from the user's message on.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    chat_id: ChatId
    user_id: UserId
    assistant_id: str
    thread_id: ThreadId
    # The reply. Its key in the payload and the event's data is still `rootMessageId`: runs in
    # flight and stored jobs carry it.
    reply_id: MessageId = Field(alias="rootMessageId")
    checkpoint_id: str = ""
    # The model spec (agent/model.py), under the key `modelConfig` of the contract.
    model_spec: dict[str, Any] = Field(alias="modelConfig")
    kind: Literal["handoff", "turn"] = "handoff"
    # Absent from jobs stored before turns carried it; a `turn` job always has it.
    user_message_id: MessageId | None = None
    # The message's text, from the request. Never in the payload or the event, whose copies
    # would outlive the message's deletion: the background reads it from the message row
    # (payloads stored before carry it, and still run with it).
    content: str | None = Field(default=None, exclude=True)
    # The W3C trace context of the request that began the turn (infra/telemetry.py): every
    # step of the background run, a replay's included, joins that trace.
    trace: dict[str, str] = Field(default_factory=dict)
    # When the quick path handed off (epoch seconds): the background measures its delay.
    handed_off_at: float | None = None
    # The deployment's assistants' names by id, when the chat has several: the turn then begins
    # with the chat's public messages its thread has not seen, attributed by these names
    # (turns/context.py). Empty for a chat with one assistant, which reads no other voice.
    assistant_names: dict[str, str] = Field(default_factory=dict)
    # False for a further assistant a message addresses: the user's message is the first
    # addressee's, whose turn marks it with where it began (infra/store/branches.py).
    owns_message: bool = True
    # The fork the turn opens (an edit, a reply answered again): the background's opening
    # round of a queued turn forks as the quick path does. Later rounds continue the turn.
    edit: Edit | None = None
    # A regenerated dependent of an edit (turns/cascade.py): what it hears of the chat's other
    # voices, the public messages by id in order (its original's context, each by its latest
    # replacement), rather than what its thread has not seen before its message; and the reply
    # it replaces, which its opening round marks `replacedBy`.
    context: list[MessageId] | None = None
    replaces: MessageId | None = None
    # Not in the payload. The job's key, which is also its event's id; the quick path's
    # LangGraph run.
    job_key: str = Field(default="", exclude=True)
    run_id: str = Field(default="", exclude=True)
    # The further assistants the message addresses and their replies, by assistant id.
    other_replies: dict[str, MessageId] = Field(default_factory=dict, exclude=True)

    @property
    def log(self) -> dict[str, str]:
        return {"chat_id": str(self.chat_id), "correlation_id": str(self.reply_id)}

    def to_data(self) -> TurnPayload:
        """The job's payload and the event's data. A key later builds added is left out at its
        default, so a turn of one assistant keeps the shape the previous build reads and writes."""
        unset = {"assistant_names"} if not self.assistant_names else set()
        unset |= {"owns_message"} if self.owns_message else set()
        unset |= {"edit"} if self.edit is None else set()
        unset |= {"context"} if self.context is None else set()
        unset |= {"replaces"} if self.replaces is None else set()
        return cast(TurnPayload, self.model_dump(mode="json", by_alias=True, exclude=unset))

    def paused_at(self, checkpoint_id: str | None) -> Turn:
        """The turn handed off at `checkpoint_id`, for the background to resume."""
        return self.model_copy(
            update={
                "checkpoint_id": checkpoint_id or "",
                "kind": "handoff",
                "handed_off_at": time.time(),
            }
        )

    def waiting(self) -> Turn:
        """The turn enqueued behind another job: the background runs all of it."""
        return self.model_copy(update={"kind": "turn"})

    def stream_metadata(self) -> dict[str, object]:
        """The data of the stream's first event: who answers, and the other replies the message
        started, which the client follows over Realtime."""
        metadata: dict[str, object] = {
            "chatId": str(self.chat_id),
            "threadId": self.thread_id,
            "assistantId": self.assistant_id,
            "userMessageId": str(self.user_message_id),
            "assistantMessageId": str(self.reply_id),
            "runId": self.run_id,
        }
        if self.other_replies:
            metadata["otherReplies"] = [
                {"assistantId": a, "assistantMessageId": str(r)}
                for a, r in self.other_replies.items()
            ]
        return metadata

    def handoff_event(self, strategy: str | None = None) -> dict[str, str]:
        """The data of the stream's `handoff` event: the reply goes on in the background.
        `strategy`: how a message sent while another turn ran was taken (`enqueue`)."""
        data = {
            "assistantMessageId": str(self.reply_id),
            "eventId": self.job_key,
            "status": "queued",
        }
        return {**data, "strategy": strategy} if strategy else data

    @property
    def attributes(self) -> dict[str, str]:
        """What its spans say about the turn: the chat (GenAI's conversation), the reply."""
        return {
            "gen_ai.conversation.id": str(self.chat_id),
            "handoff.message.id": str(self.reply_id),
        }


def reply_metadata(turn: Turn) -> MessageMetadata:
    """What a reply's metadata holds from the start."""
    model: Any = turn.model_spec.get("model")
    return {"model": model if isinstance(model, str) else None, "runId": turn.run_id}


def spent(turn: Turn, used: TurnUsage, snapshot: AgentSnapshot) -> Spent:
    """What the turn's reply has used so far (infra/store/usage.py): its model calls' tokens,
    and the tool calls that were answered."""
    return Spent(
        model=reply_metadata(turn).get("model"),
        input_tokens=used["input"],
        output_tokens=used["output"],
        tool_calls=sum(1 for p in snapshot.progress if p.status != "pending"),
    )
