"""The app's routes as a typed client: one method per route, taking the caller's token."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI

from infra.settings import Settings

Event = tuple[str, dict[str, Any]]
Json = dict[str, Any]


def auth(token: str | None) -> dict[str, str]:
    """The Authorization header of `token`; none for None (an unauthenticated call)."""
    return {"Authorization": f"Bearer {token}"} if token is not None else {}


def sse(response: httpx.Response) -> list[Event]:
    """The events of a streaming route's 200 answer."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.content)


def ok(response: httpx.Response, status: int = 200) -> Json:
    """The JSON body of an answer that must have `status`."""
    assert response.status_code == status, response.text
    body: Json = response.json()
    return body


@dataclass
class Api:
    """The app as a client sees it: over HTTP, in-process or on a server.

    One method per route, each taking the caller's token (None: no Authorization header).
    Reads (`history` and its `messages`, `branches`, `chats`, `usage`) and the streaming
    routes (`respond`, `regenerate`) return the parsed answer and fail the test unless it is a
    200; each has a `*_response` twin for a test that checks another status. Writes return the
    `httpx.Response`, for the test to check its status and body (`ok(response, 202)` parses).
    A keyword body is sent as the JSON body, none at all when it is empty."""

    app: FastAPI
    settings: Settings
    http: httpx.AsyncClient
    database_url: str

    async def call(
        self,
        method: str,
        path: str,
        token: str | None,
        body: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Any request, its answer read whole (a stream's too); `headers` add to or replace
        the token's (a test of malformed credentials sends its own)."""
        headers = {**auth(token), **(headers or {})}
        return await self.http.request(method, path, json=body, params=params, headers=headers)

    async def respond(self, token: str | None, body: Any) -> list[Event]:
        """POST /api/chat/respond and read the whole SSE stream."""
        async with self.http.stream(
            "POST", "/api/chat/respond", json=body, headers=auth(token)
        ) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            return parse_sse(await response.aread())

    async def respond_response(self, token: str | None, body: Any) -> httpx.Response:
        return await self.call("POST", "/api/chat/respond", token, body)

    async def regenerate(
        self, token: str | None, chat_id: uuid.UUID, message_id: str | uuid.UUID, **body: Any
    ) -> list[Event]:
        return sse(await self.regenerate_response(token, chat_id, message_id, **body))

    async def regenerate_response(
        self, token: str | None, chat_id: uuid.UUID, message_id: str | uuid.UUID, **body: Any
    ) -> httpx.Response:
        path = f"/api/chat/{chat_id}/messages/{message_id}/regenerate"
        return await self.call("POST", path, token, body or None)

    async def chats(self, token: str | None, **params: Any) -> list[Json]:
        chats: list[Json] = ok(await self.chats_response(token, **params))["chats"]
        return chats

    async def chats_response(self, token: str | None, **params: Any) -> httpx.Response:
        return await self.call("GET", "/api/chats", token, params=params)

    async def create_chat(self, token: str | None, **body: Any) -> httpx.Response:
        return await self.call("POST", "/api/chats", token, body or None)

    async def assistants(self, token: str | None) -> list[Json]:
        """The deployment's assistants."""
        listed: list[Json] = ok(await self.assistants_response(token))["assistants"]
        return listed

    async def assistants_response(self, token: str | None) -> httpx.Response:
        return await self.call("GET", "/api/assistants", token)

    async def chat_assistants(self, token: str | None, chat_id: uuid.UUID) -> list[Json]:
        """The chat's assistants, each with `isDefault`."""
        listed: list[Json] = ok(await self.chat_assistants_response(token, chat_id))["assistants"]
        return listed

    async def chat_assistants_response(
        self, token: str | None, chat_id: uuid.UUID
    ) -> httpx.Response:
        return await self.call("GET", f"/api/chats/{chat_id}/assistants", token)

    async def add_assistant(
        self, token: str | None, chat_id: uuid.UUID, **body: Any
    ) -> httpx.Response:
        return await self.call("POST", f"/api/chats/{chat_id}/assistants", token, body)

    async def remove_assistant(
        self, token: str | None, chat_id: uuid.UUID, assistant_id: str
    ) -> httpx.Response:
        return await self.call("DELETE", f"/api/chats/{chat_id}/assistants/{assistant_id}", token)

    async def members(self, token: str | None, chat_id: uuid.UUID) -> list[Json]:
        """The chat's owner and members, the owner first."""
        listed: list[Json] = ok(await self.members_response(token, chat_id))["members"]
        return listed

    async def members_response(self, token: str | None, chat_id: uuid.UUID) -> httpx.Response:
        return await self.call("GET", f"/api/chats/{chat_id}/members", token)

    async def add_member(
        self, token: str | None, chat_id: uuid.UUID, **body: Any
    ) -> httpx.Response:
        """POST a member: `userId=...` or `email=...` (sent as given)."""
        return await self.call("POST", f"/api/chats/{chat_id}/members", token, body)

    async def remove_member(
        self, token: str | None, chat_id: uuid.UUID, user_id: uuid.UUID
    ) -> httpx.Response:
        return await self.call("DELETE", f"/api/chats/{chat_id}/members/{user_id}", token)

    async def history(self, token: str | None, chat_id: uuid.UUID, **params: Any) -> Json:
        """The history document: `messages` and `branchId`."""
        return ok(await self.history_response(token, chat_id, **params))

    async def messages(self, token: str | None, chat_id: uuid.UUID, **params: Any) -> list[Json]:
        """The history's messages."""
        messages: list[Json] = (await self.history(token, chat_id, **params))["messages"]
        return messages

    async def history_response(
        self, token: str | None, chat_id: uuid.UUID, **params: Any
    ) -> httpx.Response:
        return await self.call("GET", f"/api/chat/{chat_id}/history", token, params=params)

    async def branches(self, token: str | None, chat_id: uuid.UUID, **params: Any) -> Json:
        return ok(await self.branches_response(token, chat_id, **params))

    async def branches_response(
        self, token: str | None, chat_id: uuid.UUID, **params: Any
    ) -> httpx.Response:
        return await self.call("GET", f"/api/chat/{chat_id}/branches", token, params=params)

    async def activate(
        self, token: str | None, chat_id: uuid.UUID, branch_id: str, **body: Any
    ) -> httpx.Response:
        path = f"/api/chat/{chat_id}/branches/{branch_id}/activate"
        return await self.call("POST", path, token, body or None)

    async def cancel(self, token: str | None, chat_id: uuid.UUID, **body: Any) -> httpx.Response:
        return await self.call("POST", f"/api/chat/{chat_id}/cancel", token, body or None)

    async def pause(self, token: str | None, chat_id: uuid.UUID, **body: Any) -> httpx.Response:
        return await self.call("POST", f"/api/chat/{chat_id}/pause", token, body or None)

    async def resume(self, token: str | None, chat_id: uuid.UUID, **body: Any) -> httpx.Response:
        return await self.call("POST", f"/api/chat/{chat_id}/resume", token, body or None)

    async def approve(
        self, token: str | None, chat_id: uuid.UUID, tool_call_id: str, **body: Any
    ) -> httpx.Response:
        """POST an approval: `approved=True` or False, and `note` (sent as given)."""
        path = f"/api/chat/{chat_id}/approvals/{tool_call_id}"
        return await self.call("POST", path, token, body)

    async def answer(
        self, token: str | None, chat_id: uuid.UUID, question_id: str, **body: Any
    ) -> httpx.Response:
        """POST an answer: `answer="..."` (sent as given, an empty body too)."""
        path = f"/api/chat/{chat_id}/answers/{question_id}"
        return await self.call("POST", path, token, body)

    async def usage(self, token: str | None, **params: Any) -> Json:
        return ok(await self.usage_response(token, **params))

    async def usage_response(self, token: str | None, **params: Any) -> httpx.Response:
        return await self.call("GET", "/api/usage", token, params=params)


def parse_sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events
