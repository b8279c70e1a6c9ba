"""Who answers a message: the assistant the request names, else those its content @-mentions,
else the chat's default; in a shared chat, nobody but those named.

- An explicit `assistantId` wins; an id no assistant of the deployment has is UnknownAssistant.
- Else the @-mentions (agent/mentions.py), matched against the deployment's assistants in the
  order the message names them; at most MAX_ASSISTANTS_PER_MESSAGE (TooManyAddressees). A
  mention of no assistant is plain text.
- Else, in a chat of its owner alone, the chat's default assistant; in a shared chat (one with
  members), nobody: the message is posted to the chat, for its people, and every assistant
  hears it at its next turn.

Each addressee must take part in the chat (NotInChat). One statement reads the chat's
assistants and whether it is shared, if the sender owns it or is a member (if not, storing the
message refuses it); respond loads the likeliest addressee's history meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.assistants import Assistant, Assistants
from agent.mentions import mentioned
from infra.db import Pool
from infra.store.assistants import ChatRoute, chat_route
from infra.store.ids import ChatId, UserId


class NotInChat(LookupError):
    """The assistant a message is addressed to does not take part in the chat."""

    def __init__(self, assistant: Assistant) -> None:
        super().__init__(assistant.id)
        self.assistant = assistant


class TooManyAddressees(ValueError):
    """The message mentions more assistants than one message may address."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"at most {limit}")
        self.limit = limit


@dataclass(frozen=True)
class Addressees:
    """The assistants that answer a message, in order: the first on the quick path, each other
    with a reply of its own in the background; none for a message posted to a shared chat
    only. `names`: the deployment's assistants' names by id when the chat has several (each
    turn then hears the others), else empty."""

    answering: list[Assistant]
    names: dict[str, str]

    @property
    def first(self) -> Assistant:
        return self.answering[0]

    @property
    def others(self) -> list[Assistant]:
        return self.answering[1:]


async def addressees(
    pool: Pool,
    assistants: Assistants,
    *,
    chat_id: ChatId,
    user_id: UserId,
    content: str,
    assistant_id: str | None,
    max_per_message: int,
) -> Addressees:
    """Who answers `content` in the chat (see the module's rules)."""
    if assistant_id is not None:
        named = [assistants.pick(assistant_id)]
    else:
        ids = mentioned(content, [(a.id, a.name) for a in assistants])
        if len(ids) > max_per_message:
            raise TooManyAddressees(max_per_message)
        named = [assistants.pick(i) for i in ids]
    async with pool.connection() as conn:
        chat = await chat_route(conn, chat_id, user_id, assistants.default.id)
    if chat is None:
        # Not the user's chat (or no such user): storing the message refuses it, as it would
        # any message, and says which.
        return Addressees(named or [assistants.default], {})
    present = {a.assistant_id for a in chat.assistants}
    for assistant in named:
        if assistant.id not in present:
            raise NotInChat(assistant)
    if not named and not chat.shared:
        default = next((a for a in chat.assistants if a.is_default), chat.assistants[0])
        named = [assistants.pick(default.assistant_id)]
    return Addressees(named, _names(assistants, chat))


def likely(assistants: Assistants, *, content: str, assistant_id: str | None) -> Assistant:
    """Who most likely answers first, from the request alone: the assistant it names, else the
    first one its content mentions, else the deployment's default. The chat's own default, when it
    differs, is known only once `addressees` has read the chat."""
    if assistant_id is not None:
        return assistants.get(assistant_id) or assistants.default
    ids = mentioned(content, [(a.id, a.name) for a in assistants])
    return assistants.pick(ids[0]) if ids else assistants.default


async def voices(
    pool: Pool, assistants: Assistants, *, chat_id: ChatId, user_id: UserId
) -> dict[str, str]:
    """The names a turn in the chat hears the others by (as Addressees.names): empty for a chat
    of one assistant and its owner alone, or one that is not the user's."""
    async with pool.connection() as conn:
        chat = await chat_route(conn, chat_id, user_id, assistants.default.id)
    return _names(assistants, chat)


def _names(assistants: Assistants, chat: ChatRoute | None) -> dict[str, str]:
    """Each assistant's name by id when the chat has several, for its turns to hear the others
    by; in a shared chat also when it has one, as its people's messages are heard by name."""
    if chat is None or (len(chat.assistants) == 1 and not chat.shared):
        return {}
    return {a.id: a.name for a in assistants}
