"""Questions the model asks the user (the `ask_user` tool), kept on the assistant message.

While a question waits, the message is `awaiting_input` with it in `metadata.pendingQuestion`
(`questionId`, which is the tool call's id, `question`, `options`, `context`, `expiresAt`). The
answer of the person who started the turn is recorded in `metadata.answers[<question id>]`
before the `chat/user_answer` event wakes the function (infra/store/prompts.py); a question
nobody answered in time gets a `timed_out` record instead.
"""

from __future__ import annotations

from typing import TypedDict

from infra.db import Conn, Pool
from infra.store.access import Claims, act_as_service, user_transaction
from infra.store.chats import require_chat
from infra.store.ids import ChatId, MessageId
from infra.store.prompts import PromptKind, require_starter


class PendingQuestion(TypedDict):
    """`metadata.pendingQuestion`: the model's question waiting for the user's answer."""

    questionId: str  # the call's id
    question: str
    options: list[str]
    context: str
    expiresAt: str  # ISO 8601


class Answer(TypedDict):
    answer: str | None
    timed_out: bool


QUESTIONS = PromptKind[PendingQuestion, Answer](
    status="awaiting_input",
    pending_key="pendingQuestion",
    id_key="questionId",
    record_key="answers",
)


class QuestionNotPending(LookupError):
    """No question of the user's chat waits for an answer under this id."""


class QuestionAlreadyAnswered(RuntimeError):
    """The question has its answer already."""


async def ask(conn: Conn, message_id: MessageId, pending: PendingQuestion) -> bool:
    """Put the question to the user; False when it was answered already (a replayed job)."""
    return await QUESTIONS.ask(conn, message_id, pending)


async def waiting(conn: Conn, message_id: MessageId, question_id: str) -> bool:
    """Whether the question still waits for the user's answer, within its time."""
    return await QUESTIONS.waiting(conn, message_id, question_id)


async def settle(conn: Conn, message_id: MessageId, question_id: str) -> Answer:
    """The user's answer, or a timeout recorded now if there is none; the question closes."""
    return await QUESTIONS.settle(
        conn, message_id, question_id, Answer(answer=None, timed_out=True)
    )


async def record_answer(
    pool: Pool, claims: Claims, *, chat_id: ChatId, question_id: str, answer: str
) -> MessageId:
    """The answer of the person who started the turn to a waiting question; returns the
    message that waits.

    ChatNotFound unless the caller is in the chat; NotTurnStarter when someone else started the
    turn; QuestionNotPending when none of its messages
    waits on `question_id`; QuestionAlreadyAnswered for a second answer."""
    async with user_transaction(pool, claims) as conn:
        await require_chat(conn, chat_id)
        pending = await QUESTIONS.pending_in(conn, chat_id, question_id)
        if pending is None:
            raise QuestionNotPending(question_id)
        message_id, answered = pending
        await act_as_service(conn)
        await require_starter(conn, message_id, claims["sub"])
        if answered:
            raise QuestionAlreadyAnswered(question_id)
        if not await QUESTIONS.record(
            conn, message_id, question_id, Answer(answer=answer, timed_out=False)
        ):
            raise QuestionAlreadyAnswered(question_id)
    return message_id
