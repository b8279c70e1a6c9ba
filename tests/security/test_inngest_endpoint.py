"""`/api/inngest` in production mode: only Inngest, signing with our key, may make it do anything.

Inngest here is a recording stand-in for Inngest Cloud: it accepts events and app syncs and never
calls the app back. So a queued job stays queued until a test itself delivers the call that
Inngest would make, and any effect on the job comes from that call alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import jcs  # type: ignore[import-untyped]
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from devkit.local_inngest import loopback_socket, serve_asgi, sign_body
from functions.app import FreshInngestSignature
from tests.support import Stack, create_user_with_chat, fetch, running_stack, token_for

SERVE_PATH = "/api/inngest"
FUNCTION_ID = "handoff-tool-handoff"
JOB_STATE_SQL = """
select j.status, j.attempt, j.run_id, m.status as message_status, m.content
from job_runs j join message m on m.id = j.root_message_id
"""


@dataclass
class RecordingInngest:
    """Inngest Cloud's event API and sync endpoint, reduced to a notebook."""

    events: list[dict[str, Any]] = field(default_factory=list)
    syncs: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        async def receive_events(request: Request) -> JSONResponse:
            body = json.loads(await request.body())
            batch = body if isinstance(body, list) else [body]
            self.events.extend(batch)
            return JSONResponse({"ids": [e.get("id") for e in batch], "status": 200})

        async def register(request: Request) -> JSONResponse:
            self.syncs.append(json.loads(await request.body()))
            return JSONResponse({"ok": True})

        return Starlette(
            routes=[
                Route("/e/{event_key}", receive_events, methods=["POST"]),
                Route("/fn/register", register, methods=["POST"]),
            ]
        )


@dataclass(frozen=True)
class QueuedJob:
    stack: Stack
    inngest: RecordingInngest
    event: dict[str, Any]


@pytest.fixture
async def inngest() -> AsyncIterator[tuple[RecordingInngest, str]]:
    recorder = RecordingInngest()
    async with serve_asgi(recorder.app(), loopback_socket()) as origin:
        yield recorder, origin


@pytest.fixture
async def queued_job(
    database_url: str, inngest: tuple[RecordingInngest, str]
) -> AsyncIterator[QueuedJob]:
    """A turn that handed off to the background: its event went out, nobody has run it yet."""
    recorder, origin = inngest
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, inngest_base_url=origin) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/calc 6*7"}
        )
        assert events[-1][0] == "handoff"
        [event] = recorder.events
        yield QueuedJob(stack, recorder, event)


def call_body(event: dict[str, Any], *, run_id: str = "run-1") -> bytes:
    """The first request Inngest's executor makes for a run of `event`, in canonical JSON."""
    canonical = jcs.canonicalize(
        {
            "ctx": {
                "run_id": run_id,
                "attempt": 0,
                "max_attempts": 5,
                "disable_immediate_execution": False,
                "use_api": False,
                "stack": {"stack": []},
            },
            "event": event,
            "events": [event],
            "steps": {},
            "use_api": False,
            "version": 1,
        }
    )
    assert isinstance(canonical, bytes)
    return canonical


def signing_key(stack: Stack) -> str:
    key = stack.settings.inngest_signing_key
    assert key is not None
    return key.get_secret_value()


async def deliver(stack: Stack, body: bytes, signature: str | None) -> httpx.Response:
    headers = {"content-type": "application/json", "x-inngest-server-kind": "cloud"}
    if signature is not None:
        headers["x-inngest-signature"] = signature
    return await stack.http.post(
        SERVE_PATH, params={"fnId": FUNCTION_ID, "stepId": "step"}, content=body, headers=headers
    )


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"message": "Unauthorized"}
    assert "Traceback" not in response.text


# Each forgery gets the request Inngest would send for the queued job, and the real signing key
# only through what an attacker could also see: an old signature of another body.
Forgery = Callable[[bytes, str], tuple[bytes, str | None]]


def tampered(body: bytes, key: str) -> tuple[bytes, str | None]:
    signature = sign_body(body, key)
    return body.replace(b'"attempt":0', b'"attempt":1'), signature


FORGERIES: dict[str, Forgery] = {
    "unsigned": lambda body, key: (body, None),
    "garbage-signature": lambda body, key: (body, f"t={int(time.time())}&s=deadbeef"),
    "malformed-header": lambda body, key: (body, "not-a-signature"),
    "signed-with-another-key": lambda body, key: (
        body,
        sign_body(body, "signkey-prod-" + "0" * 64),
    ),
    "signature-of-another-body": tampered,
}


@pytest.mark.parametrize("forgery", FORGERIES.values(), ids=FORGERIES.keys())
async def test_a_forged_call_is_refused_and_runs_nothing(
    queued_job: QueuedJob, database_url: str, forgery: Forgery
) -> None:
    # GIVEN a queued job and the call Inngest would make to run it
    stack = queued_job.stack
    before = await fetch(database_url, JOB_STATE_SQL)
    assert [row["status"] for row in before] == ["queued"]
    body, signature = forgery(call_body(queued_job.event), signing_key(stack))
    # WHEN someone without the signing key makes it
    response = await deliver(stack, body, signature)
    # THEN it is refused without details, and the job was not touched
    assert_refused(response)
    assert await fetch(database_url, JOB_STATE_SQL) == before


async def test_the_same_call_signed_with_our_key_runs_the_function(
    queued_job: QueuedJob, database_url: str
) -> None:
    # The control for the forgeries: with the right signature, this very call claims the job.
    body = call_body(queued_job.event)
    response = await deliver(queued_job.stack, body, sign_body(body, signing_key(queued_job.stack)))
    assert response.status_code == 206, response.text
    [job] = await fetch(database_url, JOB_STATE_SQL)
    assert (job["status"], job["attempt"], job["run_id"]) == ("processing", 1, "run-1")


async def test_a_replayed_call_with_an_old_signature_is_refused(
    queued_job: QueuedJob, database_url: str
) -> None:
    # GIVEN a call Inngest really signed, captured an hour ago (a log line, a proxy)
    body = call_body(queued_job.event)
    old = sign_body(body, signing_key(queued_job.stack), unix_s=int(time.time()) - 3600)
    before = await fetch(database_url, JOB_STATE_SQL)
    # WHEN it is replayed
    response = await deliver(queued_job.stack, body, old)
    # THEN it is refused like any forgery
    assert_refused(response)
    assert await fetch(database_url, JOB_STATE_SQL) == before


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="out-of-band-unsigned"),
        pytest.param(
            {"x-inngest-signature": f"t={int(time.time())}&s=deadbeef"},
            id="out-of-band-forged",
        ),
        pytest.param({"x-inngest-sync-kind": "in_band"}, id="in-band-unsigned"),
    ],
)
async def test_an_unsigned_sync_is_refused_and_registers_nothing(
    database_url: str, inngest: tuple[RecordingInngest, str], headers: dict[str, str]
) -> None:
    recorder, origin = inngest
    async with running_stack(database_url, inngest_base_url=origin) as stack:
        # WHEN anyone asks the app to sync, naming their own host as the app's address
        response = await stack.http.put(SERVE_PATH, headers={"host": "attacker.test", **headers})
    # THEN the app refuses, and Inngest never hears of attacker.test as the app's URL
    assert_refused(response)
    assert recorder.syncs == []


async def test_an_unsigned_inspection_tells_nothing(database_url: str) -> None:
    async with running_stack(database_url) as stack:
        response = await stack.http.get(SERVE_PATH)
    assert_refused(response)
    assert "hash" not in response.text


def behind_freshness_check(*, enabled: bool = True) -> httpx.AsyncClient:
    async def reached(_: Request) -> JSONResponse:
        return JSONResponse({"reached": True})

    inner = Starlette(
        routes=[Route(p, reached, methods=["GET", "POST", "PUT"]) for p in (SERVE_PATH, "/other")]
    )
    guarded = FreshInngestSignature(inner, path=SERVE_PATH, enabled=enabled)
    return httpx.AsyncClient(transport=httpx.ASGITransport(guarded), base_url="http://app")


@pytest.mark.parametrize(
    ("path", "signed_ago_s", "enabled", "reached"),
    [
        pytest.param(SERVE_PATH, 0, True, True, id="fresh"),
        pytest.param(SERVE_PATH, 290, True, True, id="almost-five-minutes-old"),
        pytest.param(SERVE_PATH, 600, True, False, id="ten-minutes-old"),
        pytest.param(SERVE_PATH, -600, True, False, id="ten-minutes-ahead"),
        pytest.param(SERVE_PATH, None, True, False, id="no-timestamp"),
        pytest.param(SERVE_PATH, 600, False, True, id="dev-server-mode"),
        pytest.param("/other", 600, True, True, id="another-path"),
    ],
)
async def test_the_freshness_check_refuses_old_signatures(
    path: str, signed_ago_s: int | None, enabled: bool, reached: bool
) -> None:
    signature = "s=deadbeef"
    if signed_ago_s is not None:
        signature = f"t={int(time.time()) - signed_ago_s}&{signature}"
    async with behind_freshness_check(enabled=enabled) as client:
        for method in ("GET", "POST", "PUT"):
            response = await client.request(
                method, path, headers={"x-inngest-signature": signature}
            )
            if reached:
                assert response.json() == {"reached": True}
            else:
                assert_refused(response)


async def test_the_freshness_check_leaves_unsigned_calls_to_the_sdk() -> None:
    async with behind_freshness_check() as client:
        response = await client.post(SERVE_PATH)
    assert response.json() == {"reached": True}
