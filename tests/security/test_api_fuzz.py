"""Schemathesis against the app's own OpenAPI schema, served by the running stack.

Requests generated from the schema, valid and invalid, with a token for a user who owns a chat
and with none. Whatever is sent: no 5xx, no stack trace in any body, every 4xx from our routes
is `{"error": {"code", "message"}}` as the schema documents it, and an answer that streams never
ends in an internal error, nor leaves an exception in the server's log.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis import APIOperation, GenerationMode
from schemathesis.checks import CheckContext, CheckFunction, not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.security.server_log import describe, logged_exceptions
from tests.support import create_user_with_chat, parse_sse, running_stack, token_for

Operation = APIOperation[Any, Any, Any, Any]
Case = schemathesis.Case[Operation]

MAX_EXAMPLES = 50
INNGEST_PATH = "/api/inngest"
STACK_TRACE_MARKERS = ("Traceback (most recent call last)", 'File "/', "site-packages")


def no_stack_trace(ctx: CheckContext, response: schemathesis.Response, case: Any) -> None:
    for marker in STACK_TRACE_MARKERS:
        assert marker not in response.text, f"the body shows internals ({marker!r})"


def errors_are_our_json(ctx: CheckContext, response: schemathesis.Response, case: Any) -> None:
    if not 400 <= response.status_code < 500:
        return
    [content_type] = response.headers.get("content-type", [""])
    assert content_type == "application/json", f"a {response.status_code} as {content_type!r}"
    body = response.json()
    assert isinstance(body, dict), body
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert all(isinstance(v, str) and v for v in body["error"].values()), body


def streams_end_cleanly(ctx: CheckContext, response: schemathesis.Response, case: Any) -> None:
    [content_type] = response.headers.get("content-type", [""])
    if response.status_code != 200 or not content_type.startswith("text/event-stream"):
        return
    events = parse_sse(response.content)
    assert events, "an empty stream"
    last, data = events[-1]
    assert last in {"done", "handoff", "error"}, f"the stream stopped after {last!r}"
    assert (last, data.get("code")) != ("error", "internal"), data


def someone_elses_chat_stays_closed(chat_id: uuid.UUID) -> CheckFunction:
    def check(ctx: CheckContext, response: schemathesis.Response, case: Any) -> None:
        body = case.body
        if isinstance(body, dict) and body.get("chatId") == str(chat_id):
            assert response.status_code >= 400, "answered in someone else's chat"

    check.__name__ = "someone_elses_chat_stays_closed"
    return check


def checks_for(operation: Operation, someone_elses_chat: uuid.UUID) -> list[CheckFunction]:
    anywhere: list[CheckFunction] = [not_a_server_error, no_stack_trace]
    if operation.path == INNGEST_PATH:
        # Inngest's protocol (206 step plans, 401 {"message": ...}), not our error contract.
        return anywhere
    return [
        *anywhere,
        errors_are_our_json,
        streams_end_cleanly,
        someone_elses_chat_stays_closed(someone_elses_chat),
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
        negative_data_rejection,
        ignored_auth,
    ]


def aimed_at(schema: dict[str, Any], chat_ids: list[uuid.UUID]) -> dict[str, Any]:
    """The schema, with chatId drawn from these chats: a random UUID is never a visible chat, so
    valid requests would all stop at the 404 and never reach the deeper paths."""
    schema = copy.deepcopy(schema)
    properties = schema["components"]["schemas"]["RespondRequest"]["properties"]
    properties["chatId"] = {**properties["chatId"], "enum": [str(c) for c in chat_ids]}
    return schema


SETTINGS = hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)


RESPOND = "POST /api/chat/respond"
# (operation, status) -> how many responses
Tally = Counter[tuple[str, int]]


def send(
    case: Case, base_url: str, headers: dict[str, str], checks: list[CheckFunction], tally: Tally
) -> None:
    response = case.call(base_url=base_url, headers=headers, timeout=30)
    tally[case.operation.label, response.status_code] += 1
    case.validate_response(response, checks=checks, headers=headers)


def cover(operation: Operation, send_case: Callable[[Case], None]) -> None:
    """Schemathesis's coverage phase: boundary values, each wrong type, missing fields, other
    methods and media types; deterministic, one request each."""
    schema = operation.schema
    cases = list(
        schema.iter_coverage_cases(
            operation,
            generation_modes=list(GenerationMode),
            generation_config=schema.config.generation_for(operation=operation, phase="coverage"),
        )
    )
    for case in cases:
        send_case(case)


def explore(operation: Operation, mode: GenerationMode, send_case: Callable[[Case], None]) -> None:
    """Hypothesis-generated requests, valid or invalid by `mode`."""

    @SETTINGS
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Case) -> None:
        send_case(case)

    run()


def fuzz(
    schema: dict[str, Any], base_url: str, headers: dict[str, str], someone_elses_chat: uuid.UUID
) -> Tally:
    """Every operation, with valid and invalid inputs; tallies the answers."""
    config = schemathesis.Config.from_dict({"max-stream-events": 10_000})
    tally: Tally = Counter()
    for result in schemathesis.openapi.from_dict(schema, config=config).get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        checks = checks_for(operation, someone_elses_chat)
        send_case = partial(send, base_url=base_url, headers=headers, checks=checks, tally=tally)
        cover(operation, send_case)
        has_inputs = bool(operation.body) or any(True for _ in operation.iter_parameters())
        # Without inputs there is nothing to make invalid.
        for mode in list(GenerationMode) if has_inputs else [GenerationMode.POSITIVE]:
            explore(operation, mode, send_case)
    return tally


# Every route of the API, each with its coverage phase and generated cases: about 30 s alone,
# several times that beside the rest of the suite on a 2-core machine.
@pytest.mark.timeout(360)
@pytest.mark.parametrize("with_token", [True, False], ids=["owner-token", "no-token"])
async def test_generated_requests_get_no_5xx_and_only_json_errors(
    database_url: str, with_token: bool
) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    _, someone_elses_chat = await create_user_with_chat(database_url)
    headers = {"Authorization": f"Bearer {token_for(user_id)}"} if with_token else {}
    async with running_stack(database_url) as stack:
        schema = aimed_at(stack.app.openapi(), [chat_id, someone_elses_chat])
        with logged_exceptions() as exceptions:
            # Schemathesis sends with blocking I/O; the stack is served from this event loop.
            tally = await asyncio.to_thread(fuzz, schema, stack.origin, headers, someone_elses_chat)
            await stack.executor.wait_idle()
    # A response can look fine while the server choked behind it.
    assert exceptions == [], describe(exceptions)
    # With the token, valid requests got as far as a streamed answer; without, none did.
    answered = tally[RESPOND, 200]
    assert answered > 0 if with_token else answered == 0, tally
    assert tally[RESPOND, 401] > 0, tally
