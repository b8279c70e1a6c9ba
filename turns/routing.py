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
message refuses it); for a new message, the same statement starts the turn of the one most
likely to answer when the chat confirms it (`expected`, turns/opened.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.assistants import Assistant, Assistants
from agent.mentions import mentioned
from infra.db import Pool
from infra.store.admission import Expect
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


def named(
    assistants: Assistants, *, content: str, assistant_id: str | None, max_per_message: int
) -> list[Assistant]:
    """The assistants the request names: the one `assistant_id` names, else those `content`
    @-mentions, in order (see the module's rules)."""
    if assistant_id is not None:
        return [assistants.pick(assistant_id)]
    ids = mentioned(content, [(a.id, a.name) for a in assistants])
    if len(ids) > max_per_message:
        raise TooManyAddressees(max_per_message)
    return [assistants.pick(i) for i in ids]


def expected(assistants: Assistants, named: list[Assistant]) -> tuple[Assistant, Expect] | None:
    """Who answers alone, from the request, if the chat confirms it (`handoff.open_turn`): the
    one assistant it names, which must take part in the chat, or the deployment's default when
    it names none, which must be the chat's default in a chat not shared. None when it names
    several."""
    if len(named) == 1:
        return named[0], "named"
    return (assistants.default, "default") if not named else None


def route(assistants: Assistants, named: list[Assistant], chat: ChatRoute | None) -> Addressees:
    """Who answers a message that names `named`, in `chat` (None: not the sender's chat;
    storing the message refuses it, as it would any message, and says which)."""
    if chat is None:
        return Addressees(named or [assistants.default], {})
    present = {a.assistant_id for a in chat.assistants}
    for assistant in named:
        if assistant.id not in present:
            raise NotInChat(assistant)
    if not named and not chat.shared:
        default = next((a for a in chat.assistants if a.is_default), chat.assistants[0])
        named = [assistants.pick(default.assistant_id)]
    return Addressees(named, names_of(assistants, chat))


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
    asked = named(
        assistants, content=content, assistant_id=assistant_id, max_per_message=max_per_message
    )
    async with pool.connection() as conn:
        chat = await chat_route(conn, chat_id, user_id, assistants.default.id)
    return route(assistants, asked, chat)


async def voices(
    pool: Pool, assistants: Assistants, *, chat_id: ChatId, user_id: UserId
) -> dict[str, str]:
    """The names a turn in the chat hears the others by (as Addressees.names): empty for a chat
    of one assistant and its owner alone, or one that is not the user's."""
    async with pool.connection() as conn:
        chat = await chat_route(conn, chat_id, user_id, assistants.default.id)
    return names_of(assistants, chat)


def names_of(assistants: Assistants, chat: ChatRoute | None) -> dict[str, str]:
    """Each assistant's name by id when the chat has several, for its turns to hear the others
    by; in a shared chat also when it has one, as its people's messages are heard by name."""
    if chat is None or (len(chat.assistants) == 1 and not chat.shared):
        return {}
    return {a.id: a.name for a in assistants}
