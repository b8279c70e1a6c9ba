"""`handoff chat`'s side of the HTTP API: the dev session and the deployment's assistants' names,
a turn's SSE stream, and the control routes it uses (approvals, answers, cancel, the history it
polls)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import httpx
from httpx_sse import EventSource, aconnect_sse

CANCEL_TIMEOUT_S = 5


class ChatFailed(Exception):
    """The turn could not run; the message says why, in the user's terms."""


def server_gone(origin: str) -> ChatFailed:
    return ChatFailed(
        f"the server at {origin} went away before the turn ended; once it is back, the chat"
        " page shows the answer"
    )


def error_text(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


@dataclass
class Session:
    http: httpx.AsyncClient
    headers: dict[str, str]
    chat_id: str
    origin: str
    token: str
    anon_key: str
    # The assistant asked (`--assistant`); None: the chat's default, or whom the message
    # @-mentions.
    assistant_id: str | None = None
    # The deployment's default assistant, and every assistant's name by id.
    default_assistant: str = ""
    names: dict[str, str] = field(default_factory=dict)
    # The user the session is (a shared chat names them "You").
    user_id: str = ""

    @classmethod
    async def open(
        cls,
        http: httpx.AsyncClient,
        chat: UUID | None,
        assistant_id: str | None = None,
        as_email: str | None = None,
    ) -> Session:
        """The demo user's session, or with `as_email` that local user's (their own chat by
        default)."""
        params = {"as": as_email} if as_email is not None else {}
        try:
            response = await http.get("/api/dev/session", params=params)
        except httpx.TransportError as exc:
            raise ChatFailed(
                f"no Handoff dev server at {http.base_url}: start one with `handoff dev`"
            ) from exc
        if response.status_code == 422:  # `--as` names no e-mail address
            raise ChatFailed(error_text(response))
        if response.status_code != 200:
            raise ChatFailed(f"{http.base_url} is not a `handoff dev` server")
        body = response.json()
        headers = {"Authorization": f"Bearer {body['token']}"}
        origin = str(http.base_url).rstrip("/")
        chat_id = str(chat or body["chatId"])
        session = cls(http, headers, chat_id, origin, body["token"], body["anonKey"])
        session.assistant_id = assistant_id
        session.default_assistant = body["assistantId"]
        session.user_id = str(body.get("userId", ""))
        session.names = await session.assistant_names()
        return session

    async def assistant_names(self) -> dict[str, str]:
        """The deployment's assistants' names by id (GET /api/assistants); none if it cannot
        say, and replies are labelled with their ids."""
        response = await self.http.get("/api/assistants", headers=self.headers)
        if response.status_code != 200:
            return {}
        return {a["id"]: a["name"] for a in response.json()["assistants"]}

    def name_of(self, assistant_id: str | None) -> str:
        """What a reply of `assistant_id` is labelled with (None: the one asked, else the
        default)."""
        shown = assistant_id or self.assistant_id or self.default_assistant
        return self.names.get(shown, shown)

    def named(self) -> dict[str, str]:
        """The body's `assistantId`, when one was asked for."""
        return {"assistantId": self.assistant_id} if self.assistant_id else {}

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post(path, json=body, headers=self.headers)

    def events(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> AbstractAsyncContextManager[EventSource]:
        # aconnect_sse adds its Accept header to the dict it is handed: give it a copy.
        extra = {"timeout": timeout} if timeout is not None else {}
        headers = dict(self.headers)
        return aconnect_sse(self.http, method, path, json=body, headers=headers, **extra)

    async def approve(self, tool_call_id: str, approved: bool) -> str | None:
        """Decide a tool call; what went wrong, if it was not recorded."""
        path = f"/api/chat/{self.chat_id}/approvals/{tool_call_id}"
        response = await self.post(path, {"approved": approved})
        return None if response.is_success else error_text(response)

    async def answer(self, question_id: str, reply: str) -> str | None:
        """Answer the model's question; what went wrong, if it was not recorded."""
        path = f"/api/chat/{self.chat_id}/answers/{question_id}"
        response = await self.post(path, {"answer": reply})
        return None if response.is_success else error_text(response)

    async def history(self) -> httpx.Response:
        return await self.http.get(f"/api/chat/{self.chat_id}/history", headers=self.headers)


@dataclass(frozen=True)
class Reply:
    """A reply the message started: its assistant (None when the server does not say) and id."""

    assistant_id: str | None
    message_id: str


@dataclass
class Streamed:
    """What the quick path streamed: its text (None for a message posted to a shared chat, which
    no assistant answers), its reply if it handed off to the background, and the other replies
    the message started (each assistant it @-mentions after the first, in order)."""

    shown: str | None = None
    handed_off: str | None = None
    assistant_id: str | None = None
    others: list[Reply] = field(default_factory=list)


def other_replies(metadata: dict[str, Any]) -> list[Reply]:
    """The `metadata` event's `otherReplies`, in order."""
    return [
        Reply(other.get("assistantId"), str(other["assistantMessageId"]))
        for other in metadata.get("otherReplies") or []
    ]


async def stream_turn(
    session: Session,
    content: str,
    on_token: Callable[[str], None],
    on_reply: Callable[[str | None], None],
) -> Streamed:
    """Stream the quick path: its reply's assistant to `on_reply` (None when the server does
    not say which), each token to `on_token`."""
    streamed = Streamed(shown="")
    body = {"chatId": session.chat_id, "content": content, **session.named()}
    try:
        async with session.events("POST", "/api/chat/respond", body) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise ChatFailed(error_text(source.response))
            async for sse in source.aiter_sse():
                event, data = sse.event, sse.json()
                if event == "metadata" and data.get("assistantMessageId", "") is None:
                    continue  # posted to the chat: no reply to name
                if event == "metadata":
                    streamed.assistant_id = data.get("assistantId")
                    streamed.others = other_replies(data)
                    on_reply(streamed.assistant_id)
                elif event == "token":
                    streamed.shown = (streamed.shown or "") + data["text"]
                    on_token(data["text"])
                elif event == "done" and data.get("status") == "posted":
                    return Streamed()
                elif event == "done":
                    streamed.shown = data["content"]
                    return streamed
                elif event == "handoff":
                    streamed.handed_off = str(data["assistantMessageId"])
                    return streamed
                elif event == "error":
                    raise ChatFailed(data["message"])
    except httpx.TransportError as exc:
        raise server_gone(session.origin) from exc
    raise ChatFailed("the server closed the stream before the turn ended")


async def cancel_turn(session: Session, assistant_id: str | None = None) -> str:
    """Cancel the chat's turn of `assistant_id` (None: the one asked, else the default); what to
    show for it."""
    named = {"assistantId": assistant_id} if assistant_id else session.named()
    try:
        async with asyncio.timeout(CANCEL_TIMEOUT_S):
            response = await session.post(f"/api/chat/{session.chat_id}/cancel", named)
    except (httpx.TransportError, TimeoutError):
        return f"[not canceled: the server at {session.origin} cannot be reached]"
    if not response.is_success:
        return f"[not canceled: {error_text(response)}]"
    return "[canceled]"
