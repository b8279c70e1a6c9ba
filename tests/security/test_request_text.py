"""A NUL character in any string a request carries is a 422 that names the field.

Postgres cannot store U+0000, and a statement that meets one fails. The fields are found in the
app's own OpenAPI schema (every request body's string properties, every string path and query
parameter), so a field added later is held to the same rule without touching this test.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import httpx

from handlers.fields import NUL_REFUSED
from tests.security.server_log import describe, logged_exceptions
from tests.support import create_user_with_chat, fetch, in_process_app, token_for

Location = Literal["body", "path", "query"]

NUL_TEXT = "before\u0000after"
# Inngest's own protocol, signed; not a route of ours.
NOT_OURS = {"/api/inngest"}
# Everything a refused request could have left behind, as the service sees it.
SNAPSHOT_SQL = """
select json_build_object(
  'chat', (select json_agg(t order by t.id) from public.chat t),
  'message', (select json_agg(t order by t.id) from public.message t),
  'job_runs', (select json_agg(t order by t.id) from public.job_runs t),
  'branch', (select json_agg(t order by t.id) from public.branch t),
  'active_branch', (select json_agg(t order by t.chat_id) from public.active_branch t),
  'user_limits', (select json_agg(t order by t.user_id) from handoff.user_limits t)
)::text as tables
"""


@dataclass(frozen=True)
class Field:
    """A string a request carries: where, under which name, and whether it is free text (no
    enum or format of its own that refuses a NUL anyway)."""

    method: str
    path: str
    location: Location
    name: str
    free_text: bool

    @property
    def label(self) -> str:
        return f"{self.method} {self.path} {self.location}.{self.name}"

    @property
    def named_as(self) -> str:
        """How a validation error names the field (see handlers/errors.py)."""
        return self.name if self.location == "body" else f"{self.location}.{self.name}"


def _alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return list(schema.get("anyOf") or schema.get("oneOf") or [schema])


def _string_kind(schema: dict[str, Any]) -> bool | None:
    """None: not a string; True: free text; False: a string from a closed set (enum, uuid)."""
    strings = [alt for alt in _alternatives(schema) if alt.get("type") == "string"]
    if not strings:
        return None
    return any("enum" not in alt and "format" not in alt for alt in strings)


def _body_schema(spec: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any] | None:
    content = operation.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    if schema is None:
        return None
    for alt in _alternatives(schema):
        if "$ref" in alt:
            name = alt["$ref"].rsplit("/", 1)[1]
            resolved: dict[str, Any] = spec["components"]["schemas"][name]
            return resolved
    return None


def string_fields(spec: dict[str, Any]) -> list[Field]:
    fields: list[Field] = []
    for path, operations in spec["paths"].items():
        if path in NOT_OURS:
            continue
        for method, operation in operations.items():
            for param in operation.get("parameters", []):
                kind = _string_kind(param["schema"])
                if kind is not None:
                    fields.append(Field(method.upper(), path, param["in"], param["name"], kind))
            body = _body_schema(spec, operation)
            for name, prop in (body or {}).get("properties", {}).items():
                kind = _string_kind(prop)
                if kind is not None:
                    fields.append(Field(method.upper(), path, "body", name, kind))
    return fields


def valid_value(name: str, schema: dict[str, Any], chat_id: uuid.UUID) -> Any:
    """A value the field takes: the request then fails on the NUL alone."""
    alt = _alternatives(schema)[0]
    if "enum" in alt:
        return alt["enum"][0]
    if alt.get("format") == "uuid":
        return str(chat_id) if name in {"chatId", "chat_id"} else str(uuid.uuid4())
    return {"boolean": True, "integer": 1}.get(alt.get("type", ""), "main")


def request_for(
    spec: dict[str, Any], field: Field, chat_id: uuid.UUID
) -> tuple[str, dict[str, str], dict[str, Any] | None]:
    """The URL, query and body of a request whose only fault is a NUL in `field`."""
    operation = spec["paths"][field.path][field.method.lower()]
    url, query = field.path, {}
    for param in operation.get("parameters", []):
        value = valid_value(param["name"], param["schema"], chat_id)
        if (param["in"], param["name"]) == (field.location, field.name):
            value = NUL_TEXT
        elif not param.get("required"):
            continue
        if param["in"] == "path":
            url = url.replace("{" + param["name"] + "}", quote(str(value), safe=""))
        else:
            query[param["name"]] = str(value)
    schema = _body_schema(spec, operation)
    body = None
    if schema is not None:
        body = {
            name: valid_value(name, schema["properties"][name], chat_id)
            for name in schema.get("required", [])
        }
        if field.location == "body":
            body[field.name] = NUL_TEXT
    return url, query, body


async def test_a_nul_in_any_request_string_is_a_422_naming_it(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    headers = {"Authorization": f"Bearer {token_for(user_id)}"}
    async with in_process_app(database_url) as stack:
        spec = (await stack.http.get("/openapi.json")).json()
        fields = string_fields(spec)
        # The walk finds the fields that once reached Postgres with a NUL and failed there.
        free = {f.label for f in fields if f.free_text}
        assert {
            "POST /api/chats body.title",
            "POST /api/chat/respond body.content",
            "POST /api/chat/{chat_id}/answers/{question_id} body.answer",
            "POST /api/chat/{chat_id}/approvals/{tool_call_id} body.note",
            "POST /api/chat/{chat_id}/resume body.instruction",
            "GET /api/chat/{chat_id}/history query.branchId",
            "POST /api/chat/{chat_id}/branches/{branch_id}/activate path.branch_id",
        } <= free, sorted(free)
        before = await fetch(database_url, SNAPSHOT_SQL)
        wrong: list[str] = []
        with logged_exceptions() as exceptions:
            for field in fields:
                url, query, body = request_for(spec, field, chat_id)
                response = await stack.http.request(
                    field.method,
                    url,
                    params=query,
                    # As a browser's JSON.stringify sends it: `\u0000`.
                    content=json.dumps(body) if body is not None else None,
                    headers={**headers, "content-type": "application/json"},
                )
                if problem := _refusal_problem(field, response):
                    wrong.append(f"{field.label}: {problem}")
    # WHEN a NUL was sent in each string field in turn, THEN each was a 422 that names it,
    assert wrong == [], "\n".join(wrong)
    # nothing was stored, and nothing was logged as a failure.
    assert await fetch(database_url, SNAPSHOT_SQL) == before
    assert exceptions == [], describe(exceptions)


def _refusal_problem(field: Field, response: httpx.Response) -> str | None:
    if response.status_code != 422:
        return f"{response.status_code} {response.text[:200]}"
    error = response.json()["error"]
    if error["code"] != "invalid_request":
        return f"code {error['code']}"
    expected = f"{field.named_as}: {NUL_REFUSED}" if field.free_text else f"{field.named_as}: "
    # A free-text field says why; one from a closed set (enum, uuid) is refused for not being
    # one of them, which names the field all the same.
    if not error["message"].startswith(expected):
        return f"message {error['message']!r}, expected {expected!r}…"
    return None
