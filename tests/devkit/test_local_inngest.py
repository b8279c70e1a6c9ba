"""LocalInngest driving a real FastAPI serve endpoint through the real Inngest SDK."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import fastapi
import httpx
import inngest
import inngest.fast_api
import pytest
import pytest_asyncio
from starlette.types import ASGIApp, Receive, Scope, Send

from devkit.local_inngest import (
    FUNCTION_ATTEMPT_KEY,
    LocalInngest,
    RunRecord,
    loopback_socket,
    serve_asgi,
    sign_body,
    socket_origin,
)
from tests.devkit.executor_harness import SERVE_PATH, served_functions

APP_ID = "local-inngest-test"

# Side effects observed by the functions, keyed by run id (or a per-test tag).
CALLS: collections.Counter[str] = collections.Counter()
SEEN: dict[str, Any] = {}
IN_FLIGHT: collections.Counter[str] = collections.Counter()
MAX_IN_FLIGHT: collections.Counter[str] = collections.Counter()


def _bump(key: str) -> int:
    CALLS[key] += 1
    return CALLS[key]


def build_functions(client: inngest.Inngest) -> list[inngest.Function[Any]]:
    @client.create_function(fn_id="seq", trigger=inngest.TriggerEvent(event="test/seq"))
    async def seq(ctx: inngest.Context) -> dict[str, Any]:
        async def first() -> dict[str, Any]:
            _bump(f"{ctx.run_id}:a")
            return {"n": ctx.event.data.get("n")}

        async def second() -> tuple[int, str]:
            _bump(f"{ctx.run_id}:b")
            return (1, "x")

        a = await ctx.step.run("a", first)
        b = await ctx.step.run("b", second)
        SEEN[f"{ctx.run_id}:b-type"] = type(b).__name__
        return {"a": a, "b": b}

    @client.create_function(fn_id="par", trigger=inngest.TriggerEvent(event="test/par"))
    async def par(ctx: inngest.Context) -> dict[str, Any]:
        def branch(label: str) -> Callable[[], Awaitable[str]]:
            async def body() -> str:
                _bump(f"{ctx.run_id}:{label}")
                return label.upper()

            return lambda: ctx.step.run(label, body)

        results = await ctx.group.parallel((branch("p1"), branch("p2"), branch("p3")))

        async def after() -> int:
            _bump(f"{ctx.run_id}:after")
            return len(results)

        return {"parallel": list(results), "after": await ctx.step.run("after", after)}

    @client.create_function(
        fn_id="flaky", retries=3, trigger=inngest.TriggerEvent(event="test/flaky")
    )
    async def flaky(ctx: inngest.Context) -> str:
        async def attempt() -> str:
            SEEN.setdefault(f"{ctx.run_id}:attempts", []).append(ctx.attempt)
            if _bump(f"{ctx.run_id}:flaky") < 3:
                raise RuntimeError("transient")
            return "ok"

        return await ctx.step.run("flaky", attempt)

    async def on_doomed_failure(ctx: inngest.Context) -> None:
        SEEN[f"failure:{ctx.event.data['run_id']}"] = json.loads(json.dumps(ctx.event.data))

    @client.create_function(
        fn_id="doomed",
        retries=3,
        on_failure=on_doomed_failure,
        trigger=inngest.TriggerEvent(event="test/doomed"),
    )
    async def doomed(ctx: inngest.Context) -> None:
        async def boom() -> None:
            _bump(f"{ctx.run_id}:boom")
            raise inngest.NonRetriableError("permanently broken")

        await ctx.step.run("boom", boom)

    @client.create_function(
        fn_id="exhausted", retries=1, trigger=inngest.TriggerEvent(event="test/exhausted")
    )
    async def exhausted(ctx: inngest.Context) -> dict[str, str]:
        async def always() -> None:
            _bump(f"{ctx.run_id}:always")
            raise ValueError("always broken")

        try:
            await ctx.step.run("always", always)
            caught: dict[str, str] = {}
        except inngest.StepError as err:
            caught = {"name": err.name, "message": err.message}
        if ctx.attempt == 0:
            raise RuntimeError("function body fails on its first attempt")
        return caught

    @client.create_function(
        fn_id="chat",
        concurrency=[inngest.Concurrency(limit=1, key="event.data.chatId")],
        trigger=inngest.TriggerEvent(event="test/chat"),
    )
    async def chat(ctx: inngest.Context) -> None:
        keys = (str(ctx.event.data["chatId"]), str(ctx.event.data["tag"]))

        async def work() -> None:
            for key in keys:
                IN_FLIGHT[key] += 1
                MAX_IN_FLIGHT[key] = max(MAX_IN_FLIGHT[key], IN_FLIGHT[key])
            await asyncio.sleep(0.3)
            for key in keys:
                IN_FLIGHT[key] -= 1

        await ctx.step.run("work", work)

    @client.create_function(fn_id="sleepy", trigger=inngest.TriggerEvent(event="test/sleepy"))
    async def sleepy(ctx: inngest.Context) -> None:
        await ctx.step.sleep("nap", datetime.timedelta(seconds=1))

    @client.create_function(fn_id="ticker", trigger=inngest.TriggerCron(cron="*/5 * * * *"))
    async def ticker(ctx: inngest.Context) -> str:
        async def tick() -> str:
            _bump(f"{ctx.run_id}:tick")
            return str(ctx.event.name)

        return await ctx.step.run("tick", tick)

    return [seq, par, flaky, doomed, exhausted, chat, sleepy, ticker]


@dataclasses.dataclass
class Harness:
    client: inngest.Inngest
    local: LocalInngest
    intake_origin: str
    serve_url: str
    signing_key: str
    event_key: str

    async def send(self, name: str, data: dict[str, Any], event_id: str = "") -> str:
        ids = await self.client.send(inngest.Event(name=name, data=data, id=event_id))
        assert len(ids) == 1
        await self.local.wait_idle(timeout=10)
        return ids[0]

    def runs_for(self, event_id: str) -> list[RunRecord]:
        return [r for r in self.local.runs() if r.event_id == event_id]

    def only_run(self, event_id: str) -> RunRecord:
        (run,) = self.runs_for(event_id)
        return run


@pytest_asyncio.fixture(scope="module")
async def harness() -> AsyncIterator[Harness]:
    async with served_functions(APP_ID, build_functions, retry_backoff=(0.02, 0.05, 0.1)) as served:
        yield Harness(
            served.client,
            served.local,
            served.intake_origin,
            served.serve_url,
            served.signing_key,
            served.event_key,
        )


async def test_sequential_steps_are_memoized_as_json(harness: Harness) -> None:
    event_id = await harness.send("test/seq", {"n": 1})
    run = harness.only_run(event_id)
    assert run.status == "completed"
    assert run.function_id == f"{APP_ID}-seq"
    assert run.output == {"a": {"n": 1}, "b": [1, "x"]}
    # The tuple the step returned comes back from the memo as a JSON list.
    assert SEEN[f"{run.run_id}:b-type"] == "list"
    assert CALLS[f"{run.run_id}:a"] == 1
    assert CALLS[f"{run.run_id}:b"] == 1
    assert run.attempts == {"a": 1, "b": 1, FUNCTION_ATTEMPT_KEY: 1}


async def test_parallel_steps_each_run_once(harness: Harness) -> None:
    run = harness.only_run(await harness.send("test/par", {}))
    assert run.status == "completed"
    assert run.output == {"parallel": ["P1", "P2", "P3"], "after": 3}
    for label in ("p1", "p2", "p3", "after"):
        assert CALLS[f"{run.run_id}:{label}"] == 1


async def test_step_is_retried_until_it_succeeds(harness: Harness) -> None:
    run = harness.only_run(await harness.send("test/flaky", {}))
    assert run.status == "completed"
    assert run.output == "ok"
    assert CALLS[f"{run.run_id}:flaky"] == 3
    assert SEEN[f"{run.run_id}:attempts"] == [0, 1, 2]
    assert run.attempts["flaky"] == 3


async def test_non_retriable_error_runs_once_and_triggers_on_failure(harness: Harness) -> None:
    event_id = await harness.send("test/doomed", {"order": 42})
    (run,) = [r for r in harness.runs_for(event_id) if r.function_id.endswith("-doomed")]
    assert run.status == "failed"
    assert CALLS[f"{run.run_id}:boom"] == 1
    assert run.error is not None
    assert run.error["name"] == "NonRetriableError"
    assert run.error["message"] == "permanently broken"

    failure = SEEN[f"failure:{run.run_id}"]
    assert failure["function_id"] == f"{APP_ID}-doomed"
    assert failure["error"]["message"] == "permanently broken"
    assert failure["event"]["id"] == event_id
    assert failure["event"]["data"] == {"order": 42}
    handler_runs = [r for r in harness.local.runs() if r.function_id == f"{APP_ID}-doomed-failure"]
    assert [r.status for r in handler_runs] == ["completed"]


async def test_exhausted_step_error_is_raised_in_function_then_function_retries(
    harness: Harness,
) -> None:
    run = harness.only_run(await harness.send("test/exhausted", {}))
    assert run.status == "completed"
    assert run.output == {"name": "ValueError", "message": "always broken"}
    assert CALLS[f"{run.run_id}:always"] == 2  # retries=1
    assert run.attempts == {"always": 2, FUNCTION_ATTEMPT_KEY: 2}


async def test_concurrency_limit_is_per_key(harness: Harness) -> None:
    tag = uuid.uuid4().hex
    chat_a, chat_b = f"a-{tag}", f"b-{tag}"
    ids = await asyncio.gather(
        *(
            harness.client.send(inngest.Event(name="test/chat", data={"chatId": c, "tag": tag}))
            for c in (chat_a, chat_a, chat_b)
        )
    )
    await harness.local.wait_idle(timeout=10)
    assert all(harness.only_run(i[0]).status == "completed" for i in ids)
    assert MAX_IN_FLIGHT[chat_a] == 1
    assert MAX_IN_FLIGHT[chat_b] == 1
    assert MAX_IN_FLIGHT[tag] == 2  # the other key ran alongside


async def test_duplicate_event_id_starts_one_run_and_replay_starts_another(
    harness: Harness,
) -> None:
    event_id = f"dedup-{uuid.uuid4().hex}"
    assert await harness.send("test/seq", {"n": 7}, event_id) == event_id
    assert await harness.send("test/seq", {"n": 7}, event_id) == event_id
    (first,) = harness.runs_for(event_id)

    replay_id = await harness.local.replay(event_id)
    await harness.local.wait_idle(timeout=10)
    runs = harness.runs_for(event_id)
    assert [r.run_id for r in runs] == [first.run_id, replay_id]
    assert replay_id != first.run_id
    assert all(r.status == "completed" and r.output == first.output for r in runs)
    assert CALLS[f"{replay_id}:a"] == 1


async def test_fire_runs_a_cron_function_now_with_the_scheduled_event(harness: Harness) -> None:
    run_id = harness.local.fire(f"{APP_ID}-ticker")
    await harness.local.wait_idle(timeout=10)
    [run] = [r for r in harness.local.runs() if r.run_id == run_id]
    assert run.status == "completed"
    assert run.output == "inngest/scheduled.timer"
    assert CALLS[f"{run_id}:tick"] == 1


def test_cron_functions_are_due_in_the_minutes_their_schedule_names(harness: Harness) -> None:
    at = datetime.datetime(2026, 11, 22, 9, 10, 30, tzinfo=datetime.UTC)
    assert harness.local.due(at) == [f"{APP_ID}-ticker"]
    assert harness.local.due(at.replace(minute=11)) == []


async def test_a_dropped_step_output_runs_the_step_again_and_the_run_completes(
    harness: Harness,
) -> None:
    # GIVEN the answer for step "a" is lost once after the step ran (a crash before the memo)
    harness.local.drop_step_output("a")
    run = harness.only_run(await harness.send("test/seq", {"n": 3}))
    # THEN the step ran twice (at-least-once), and the run completed as if nothing happened
    assert run.status == "completed"
    assert run.output == {"a": {"n": 3}, "b": [1, "x"]}
    assert CALLS[f"{run.run_id}:a"] == 2
    assert CALLS[f"{run.run_id}:b"] == 1
    assert run.attempts["a"] == 2


async def test_refused_events_fail_the_send_and_are_not_run(harness: Harness) -> None:
    # The SDK tries a send five times before it gives up.
    harness.local.refuse_events(5)
    event_id = f"refused-{uuid.uuid4().hex}"
    with pytest.raises(Exception, match="unavailable"):
        await harness.client.send(inngest.Event(name="test/seq", data={"n": 1}, id=event_id))
    await harness.local.wait_idle(timeout=10)
    assert harness.runs_for(event_id) == []
    # The same event sent again once the intake is back runs once.
    assert await harness.send("test/seq", {"n": 1}, event_id) == event_id
    assert len(harness.runs_for(event_id)) == 1


async def test_unsupported_opcode_fails_the_run_clearly(harness: Harness) -> None:
    run = harness.only_run(await harness.send("test/sleepy", {}))
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "LocalInngestUnsupported"
    assert "'Sleep'" in run.error["message"]


async def test_intake_rejects_a_wrong_event_key(harness: Harness) -> None:
    before = len(harness.local.runs())
    async with httpx.AsyncClient() as http:
        res = await http.post(f"{harness.intake_origin}/e/wrong", json=[{"name": "test/seq"}])
    assert res.status_code == 401
    assert "error" in res.json()
    await harness.local.wait_idle(timeout=10)
    assert len(harness.local.runs()) == before


@pytest.mark.parametrize("signature", [None, "bad-key", "good-key"])
async def test_serve_endpoint_verifies_signatures(harness: Harness, signature: str | None) -> None:
    event = {"name": "test/seq", "data": {"n": 1}, "id": "manual", "ts": 1}
    body = json.dumps(
        {
            "ctx": {
                "run_id": f"manual-{uuid.uuid4().hex}",
                "attempt": 0,
                "disable_immediate_execution": False,
                "stack": {"stack": []},
            },
            "event": event,
            "events": [event],
            "steps": {},
            "use_api": False,
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    headers = {"content-type": "application/json"}
    if signature == "bad-key":
        headers["x-inngest-signature"] = sign_body(body, "signkey-test-" + secrets.token_hex(32))
    elif signature == "good-key":
        headers["x-inngest-signature"] = sign_body(body, harness.signing_key)
    async with httpx.AsyncClient() as http:
        res = await http.post(
            harness.serve_url,
            params={"fnId": f"{APP_ID}-seq", "stepId": "step"},
            content=body,
            headers=headers,
        )
    if signature == "good-key":
        assert res.status_code == 206
        assert res.json()[0]["op"] == "StepRun"
    else:
        assert res.status_code == 401


async def test_unreachable_serve_endpoint_is_retried_then_fails() -> None:
    dead = loopback_socket()
    dead_url = socket_origin(dead) + SERVE_PATH
    dead.close()
    client = inngest.Inngest(
        app_id=APP_ID,
        is_production=True,
        signing_key="signkey-test-" + secrets.token_hex(32),
        event_key="key",
    )
    local = LocalInngest(
        serve_url=dead_url,
        signing_key="signkey-test-" + secrets.token_hex(32),
        event_key="key",
        functions=build_functions(client),
        app_id=APP_ID,
        retry_backoff=(0.01,),
    )
    transport = httpx.ASGITransport(app=local.intake)
    async with local, httpx.AsyncClient(transport=transport, base_url="http://intake") as http:
        res = await http.post("/e/key", json={"name": "test/flaky", "data": {}})
        assert res.status_code == 200
        (event_id,) = res.json()["ids"]
        await local.wait_idle(timeout=5)
    (run,) = [r for r in local.runs() if r.event_id == event_id]
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "LocalInngestTransportError"
    assert run.attempts == {FUNCTION_ATTEMPT_KEY: 4}  # retries=3


def fail_first_request(app: ASGIApp) -> ASGIApp:
    """A proxy that answers the first HTTP request with a bodyless, unsigned 502."""
    failed = False

    async def proxy(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal failed
        if scope["type"] == "http" and not failed:
            failed = True
            await send({"type": "http.response.start", "status": 502, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return proxy


async def test_bodyless_502_is_a_retriable_attempt_of_the_same_step() -> None:
    signing_key = "signkey-test-" + secrets.token_hex(32)
    client = inngest.Inngest(
        app_id=APP_ID, is_production=True, signing_key=signing_key, event_key="key"
    )
    functions = build_functions(client)
    app = fastapi.FastAPI()
    inngest.fast_api.serve(app, client, functions, serve_path=SERVE_PATH)
    async with serve_asgi(fail_first_request(app)) as origin:
        local = LocalInngest(
            serve_url=origin + SERVE_PATH,
            signing_key=signing_key,
            event_key="key",
            functions=functions,
            app_id=APP_ID,
            retry_backoff=(0.01,),
        )
        transport = httpx.ASGITransport(app=local.intake)
        async with local, httpx.AsyncClient(transport=transport, base_url="http://i") as http:
            res = await http.post("/e/key", json=[{"name": "test/seq", "data": {"n": 3}}])
            (event_id,) = res.json()["ids"]
            await local.wait_idle(timeout=5)
    (run,) = [r for r in local.runs() if r.event_id == event_id]
    assert run.status == "completed"
    assert run.output == {"a": {"n": 3}, "b": [1, "x"]}
    # The 502 consumed attempt 0 of the first step; the step itself ran once, at attempt 1.
    assert run.attempts == {"a": 2, "b": 1, FUNCTION_ATTEMPT_KEY: 1}
    assert CALLS[f"{run.run_id}:a"] == 1


def test_functions_of_another_app_are_rejected() -> None:
    other = inngest.Inngest(app_id="other-app", is_production=True, signing_key="signkey-test-00")
    with pytest.raises(ValueError, match="do not belong"):
        LocalInngest(
            serve_url="http://127.0.0.1:1/api/inngest",
            signing_key="signkey-test-00",
            event_key="key",
            functions=build_functions(other),
            app_id=APP_ID,
        )
