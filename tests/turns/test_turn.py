"""The one Turn shape: what the quick path runs, the job stores and the event carries."""

from __future__ import annotations

import json
import uuid

from infra.store.forks import Edit
from infra.store.ids import ChatId, MessageId, UserId
from turns.turn import Turn

# The chat/tool_handoff event's data as the contract names it.
EVENT_FIELDS = {
    "chatId",
    "userId",
    "assistantId",
    "threadId",
    "rootMessageId",
    "checkpointId",
    "modelConfig",
}


def quick_turn() -> Turn:
    chat_id = ChatId(uuid.uuid4())
    return Turn(
        chat_id=chat_id,
        user_id=UserId(uuid.uuid4()),
        assistant_id="default",
        thread_id=f"{chat_id}:default",
        reply_id=MessageId(uuid.uuid4()),
        user_message_id=MessageId(uuid.uuid4()),
        content="/calc 2*21",
        model_spec={"model": "scripted"},
        job_key=str(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
    )


def test_a_handed_off_turn_carries_the_event_contract_and_nothing_of_the_request() -> None:
    turn = quick_turn()

    paused = turn.paused_at("1f0-checkpoint")
    data = paused.to_data()

    assert set(data) >= EVENT_FIELDS
    assert (data["kind"], data["checkpointId"]) == ("handoff", "1f0-checkpoint")
    assert data["handedOffAt"] is not None
    # The job's key is the event's id, and the quick path's run is its own: neither is data.
    # Nor is the message's text: it stays in the message row.
    assert not {"jobKey", "runId", "edit", "content"} & set(data)
    assert Turn.model_validate(data) == paused.model_copy(
        update={"job_key": "", "run_id": "", "content": None}
    )


def test_a_waiting_turn_names_its_message_and_carries_none_of_its_text() -> None:
    turn = quick_turn()

    data = turn.waiting().to_data()
    stored = Turn.model_validate(data)

    assert stored.kind == "turn"
    # The background reads the text from the message row: deleting the message erases it.
    assert (stored.user_message_id, stored.content) == (turn.user_message_id, None)
    assert turn.content is not None
    assert turn.content not in json.dumps(data)


def test_a_waiting_fork_carries_where_it_forks_from_for_the_background() -> None:
    # GIVEN a further addressee's turn that answers an edit, forking its thread
    edit = Edit(MessageId(uuid.uuid4()), "1f0-start", MessageId(uuid.uuid4()))
    turn = quick_turn().model_copy(update={"edit": edit, "owns_message": False})

    data = turn.waiting().to_data()

    # THEN its payload names the fork in the payload's camelCase, and reads back the same
    assert data["edit"] == {
        "messageId": str(edit.message_id),
        "baseCheckpointId": "1f0-start",
        "forkedFrom": str(edit.forked_from),
        "regenerate": False,
    }
    assert Turn.model_validate(data).edit == edit


def test_a_job_stored_before_turns_carried_their_message_still_reads() -> None:
    # GIVEN the payload of a handoff job written before the payload named the user's message
    old = {
        "chatId": str(uuid.uuid4()),
        "userId": str(uuid.uuid4()),
        "assistantId": "default",
        "threadId": "x:default",
        "rootMessageId": str(uuid.uuid4()),
        "checkpointId": "1f0",
        "modelConfig": {"model": "scripted"},
    }

    # WHEN the background reads it
    turn = Turn.model_validate(old)

    # THEN it resumes the paused checkpoint
    assert (turn.kind, turn.checkpoint_id, turn.user_message_id) == ("handoff", "1f0", None)
