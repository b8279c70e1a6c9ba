"""The ids that cross the store's boundary."""

from __future__ import annotations

import uuid
from typing import NewType
from uuid import UUID

UserId = NewType("UserId", UUID)
ChatId = NewType("ChatId", UUID)
MessageId = NewType("MessageId", UUID)

# The namespace of the ids of messages whose client picked their id (`client_message_id`).
CLIENT_MESSAGE_NAMESPACE = UUID("f3a3d05a-ee9f-40d1-a5b4-3e18cf0f05c7")


def client_message_id(chat_id: ChatId, client_id: UUID) -> MessageId:
    """The key of the message a client names `client_id` in `chat_id`.

    A client's id is its own name for its message, meaningful in that chat only, while
    `message.id` is one key across every user's messages. Taken as the key itself, an id that
    another user's message already has would be refused where a fresh one passes, which tells
    whoever tries it that the id exists. Derived with the chat (a name-based UUID: SHA-1 over
    both), the same client id in the same chat is always the same message, so a retried send is
    recognised, and an id from anywhere else makes a key no message has: no other chat's message
    can be named, hit or told apart from a fresh id. The derived ids are version 5, the server's
    own version 4, so the two never meet.
    """
    return MessageId(uuid.uuid5(CLIENT_MESSAGE_NAMESPACE, f"{chat_id}/{client_id}"))
