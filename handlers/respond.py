"""POST /api/chat/respond: the quick path over Server-Sent Events."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Annotated
from uuid import UUID

from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent.assistants import Assistant
from agent.mentions import mentioned
from handlers.auth import AuthUser
from handlers.deps import CurrentUser, TurnHostDep, strict_router
from handlers.error_responses import ERROR_RESPONSES, LIMIT_RESPONSES
from handlers.errors import ApiError
from handlers.fields import NO_NUL, AssistantId
from handlers.sse import event_stream
from infra.store import forks
from infra.store.ids import ChatId, MessageId, UserId, client_message_id
from turns import cascade
from turns.opened import Opened, open_likeliest
from turns.routing import (
    Addressees,
    NotInChat,
    TooManyAddressees,
    addressees,
    expected,
    named,
    route,
)
from turns.start import Strategy, post_to_chat
from turns.streaming import TurnHost, new_turn, posted, stream_turn, turn_limits
from turns.turn import Turn

router = strict_router()
# A new turn of the assistant given, answering the request (`new_turn` with its fields).
TurnOf = Callable[..., Turn]


class RespondRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    chat_id: UUID
    content: Annotated[str, Field(min_length=1), NO_NUL]
    # The client's own id for its message, to send it again without doubling it: scoped to the
    # chat, it names the stored message through `client_message_id`, which `metadata` returns.
    user_message_id: UUID | None = None
    # Who answers: this assistant; None: those the content @-mentions, else the chat's default
    # (turns/routing.py).
    assistant_id: AssistantId = None
    # A user message of this chat and assistant to replace: the turn forks the thread from the
    # checkpoint that message's turn started from, and each further addressee that answered it
    # answers the edit, forking its own thread from where its reply's turn began.
    edit_of: UUID | None = None
    # While a job of this chat and assistant is active: refuse (409), cancel it, wait, or join
    # it (`steer`: a background job's next round sees the message).
    multitask_strategy: Strategy = "reject"


@router.post(
    "/api/chat/respond",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **ERROR_RESPONSES, **LIMIT_RESPONSES},
)
async def respond(body: RespondRequest, user: CurrentUser, host: TurnHostDep) -> StreamingResponse:
    started = time.perf_counter()
    settings = host.services.settings
    _check_content(body.content, settings.max_content_chars)
    chat_id = ChatId(body.chat_id)
    message_id = (
        client_message_id(chat_id, body.user_message_id)
        if body.user_message_id is not None
        else MessageId(uuid.uuid4())
    )
    turn_of = partial(
        new_turn,
        settings,
        user_id=user.id,
        chat_id=chat_id,
        content=body.content,
        user_message_id=message_id,
    )
    # A new message's route is read with the start of the likeliest addressee's turn, in one
    # round trip (turns/opened.py); an edit first reads what it replaces.
    opened, route = (
        await _open(host, body, chat_id, user, turn_of)
        if body.edit_of is None
        else (None, await _addressees(host, body, chat_id, user))
    )
    if not route.answering:
        return await _post(host, chat_id, user.id, message_id, body)
    further: dict[str, forks.Edit] = {}
    if opened is not None and opened.begun is not None:
        turn = opened.begun.turn
    else:
        edit = None
        if body.edit_of is not None:
            edit, further = await _edits(host, user, chat_id, route.first.id, body.edit_of)
        turn = turn_of(route.first, edit=edit)
    turn = turn.model_copy(update={"assistant_names": route.names})
    begun = opened.begun_for(host, turn) if opened is not None else None
    others = _other_turns(host, turn, route, further)
    turn = turn.model_copy(update={"other_replies": {o.assistant_id: o.reply_id for o in others}})
    stream = await stream_turn(
        turn,
        body.multitask_strategy,
        user.claims,
        host,
        started=started,
        others=others,
        begun=begun,
        taken=opened is not None and opened.started,
    )
    if turn.edit is not None and route.names:
        # Where turns hear each other, other replies may have heard what the edit replaced.
        _cascade(host, turn, turn.edit)
    return event_stream(stream.events, turn=stream.turn)


async def _open(
    host: TurnHost, body: RespondRequest, chat_id: ChatId, user: AuthUser, turn_of: TurnOf
) -> tuple[Opened | None, Addressees]:
    """Who answers a new message, read with the start of the turn of the one most likely to
    (turns/opened.py): nobody is guessed for a message naming several."""
    settings = host.services.settings
    with _routing_errors(chat_id):
        asked = named(
            host.assistants,
            content=body.content,
            assistant_id=body.assistant_id,
            max_per_message=settings.max_assistants_per_message,
        )
    likeliest = expected(host.assistants, asked)
    if likeliest is None:
        return None, await _addressees(host, body, chat_id, user)
    assistant, expect = likeliest
    opened = await open_likeliest(
        host,
        turn_of(assistant),
        expect=expect,
        strategy=body.multitask_strategy,
        limits=turn_limits(settings),
    )
    try:
        with _routing_errors(chat_id):
            found = route(host.assistants, asked, opened.route)
    except BaseException:
        opened.drop()
        raise
    # The chat confirmed the likeliest alone, or nothing started.
    assert not opened.started or [a.id for a in found.answering] == [assistant.id]
    if not found.answering:
        opened.drop()
    return opened, found


def _cascade(host: TurnHost, turn: Turn, edit: forks.Edit) -> None:
    """Request the cascade of the edit `turn` answers, once its own replies have started."""
    assert turn.user_message_id is not None
    cascade.request_later(
        host,
        chat_id=turn.chat_id,
        user_id=turn.user_id,
        edited=edit.message_id,
        replacement=turn.user_message_id,
    )


def _check_content(content: str, max_chars: int) -> None:
    if len(content) > max_chars:
        raise ApiError(413, "content_too_large", "The message is too long.")
    if not content.strip():
        raise ApiError(422, "invalid_request", "content: must not be blank")


async def _post(
    host: TurnHost, chat_id: ChatId, user_id: UserId, message_id: MessageId, body: RespondRequest
) -> StreamingResponse:
    """A message to a shared chat that names no assistant: stored for its people, answered by
    nobody (turns/routing.py)."""
    await post_to_chat(
        await host.services.pool(),
        chat_id=chat_id,
        user_id=user_id,
        message_id=message_id,
        content=body.content,
        turn_limits=turn_limits(host.services.settings),
    )
    return event_stream(posted(chat_id, message_id).events)


async def _edits(
    host: TurnHost, user: AuthUser, chat_id: ChatId, assistant_id: str, edit_of: UUID
) -> tuple[forks.Edit, dict[str, forks.Edit]]:
    """What an edit of `edit_of` forks: the first addressee's thread, and each further one's.
    Read under RLS first: they name the checkpoints the histories come from."""
    pool = await host.services.pool()
    edit = await forks.edit_target(
        pool, user.claims, chat_id=chat_id, assistant_id=assistant_id, message_id=edit_of
    )
    further = await forks.further_edits(pool, user.claims, chat_id=chat_id, message_id=edit_of)
    return edit, further


def _other_turns(
    host: TurnHost, turn: Turn, route: Addressees, further: dict[str, forks.Edit]
) -> list[Turn]:
    """The turns of the further assistants the message addresses, each in its own thread. An
    edit is answered by those of the edited message that answered it (`further`: each forks
    its own thread), as many as a message may address, and not by those its text mentions."""
    settings = host.services.settings
    answering: list[tuple[Assistant, forks.Edit | None]] = [(o, None) for o in route.others]
    if turn.edit is not None:
        found = [(host.assistants.get(a), e) for a, e in further.items()]
        answering = [(a, e) for a, e in found if a is not None]
        answering = answering[: settings.max_assistants_per_message - 1]
    return [
        new_turn(
            settings,
            other,
            user_id=turn.user_id,
            chat_id=turn.chat_id,
            content=turn.content or "",
            user_message_id=turn.user_message_id,
            edit=edit,
            assistant_names=route.names,
            owns_message=False,
        )
        for other, edit in answering
    ]


async def _addressees(
    host: TurnHost, body: RespondRequest, chat_id: ChatId, user: AuthUser
) -> Addressees:
    """Who answers the message, or the error that says why nobody can. An edit that names
    nobody (no `assistantId`, no @-mention) goes where the message it replaces went first, in
    any chat: not to the chat's default, whose thread may not have that message."""
    settings = host.services.settings
    pool = await host.services.pool()
    asked = body.assistant_id
    with _routing_errors(chat_id):
        if asked is None and body.edit_of is not None and not _mentions(host, body.content):
            # As if the edit named it: refused if the assistant has left the chat since.
            asked = await forks.edited_assistant(
                pool, user.claims, chat_id=chat_id, message_id=body.edit_of
            )
        return await addressees(
            pool,
            host.assistants,
            chat_id=chat_id,
            user_id=user.id,
            content=body.content,
            assistant_id=asked,
            max_per_message=settings.max_assistants_per_message,
        )


@contextmanager
def _routing_errors(chat_id: ChatId) -> Iterator[None]:
    """Why nobody can answer, as the API says it."""
    try:
        yield
    except NotInChat as exc:
        who = exc.assistant
        raise ApiError(
            409,
            "assistant_not_in_chat",
            f"{who.name} ({who.id}) is not in this chat. Add it with POST"
            f" /api/chats/{chat_id}/assistants, then send the message again.",
        ) from exc
    except TooManyAddressees as exc:
        raise ApiError(
            422,
            "invalid_request",
            f"content: mentions more assistants than MAX_ASSISTANTS_PER_MESSAGE ({exc.limit})"
            " allows in one message.",
        ) from exc


def _mentions(host: TurnHost, content: str) -> bool:
    return bool(mentioned(content, [(a.id, a.name) for a in host.assistants]))
