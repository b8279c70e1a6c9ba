"""LocalInngest's event-driven flow control: ``step.wait_for_event`` and function ``cancel``.

Small real functions behind a real FastAPI serve endpoint; events go through the real SDK
client to the executor's intake, as the app sends them.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import uuid
from collections.abc import AsyncIterator
from typing import Any

import inngest
import inngest.fast_api
import pytest
import pytest_asyncio

from devkit.local_inngest import (
    FUNCTION_CANCELLED_EVENT,
    LocalInngest,
    RunRecord,
)
from tests.devkit.executor_harness import served_functions

APP_ID = "local-inngest-events"
APPROVAL_IF = "event.data.requestId == async.data.requestId && async.data.verdict == 'approve'"

# What the functions did, keyed by request or job id (unique per test).
CALLS: collections.Counter[str] = collections.Counter()
SEEN: dict[str, Any] = {}
# Steps that wait for the test: `started` is set when the step begins, `release` lets it end.
STARTED: collections.defaultdict[str, asyncio.Event] = collections.defaultdict(asyncio.Event)
RELEASE: collections.defaultdict[str, asyncio.Event] = collections.defaultdict(asyncio.Event)


async def hold(key: str) -> None:
    STARTED[key].set()
    await asyncio.wait_for(RELEASE[key].wait(), 10)


def build_functions(client: inngest.Inngest) -> list[inngest.Function[Any]]:
    @client.create_function(fn_id="approval", trigger=inngest.TriggerEvent(event="test/request"))
    async def approval(ctx: inngest.Context) -> dict[str, Any]:
        request_id = str(ctx.event.data["requestId"])

        async def prepare() -> None:
            CALLS[f"{request_id}:prepare"] += 1
            if ctx.event.data.get("hold"):
                await hold(request_id)

        await ctx.step.run("prepare", prepare)
        answer = await ctx.step.wait_for_event(
            "approval",
            event="test/approved",
            if_exp=APPROVAL_IF,
            timeout=datetime.timedelta(seconds=int(str(ctx.event.data.get("timeout_s", 30)))),
        )

        async def record() -> dict[str, Any]:
            CALLS[f"{request_id}:record"] += 1
            if answer is None:
                return {"approved": None}
            return {"approved": dict(answer.data), "event_id": answer.id, "name": answer.name}

        return await ctx.step.run("record", record)

    @client.create_function(fn_id="vague", trigger=inngest.TriggerEvent(event="test/vague"))
    async def vague(ctx: inngest.Context) -> None:
        await ctx.step.wait_for_event(
            "big-order",
            event="test/order",
            if_exp="async.data.amount > 10",
            timeout=datetime.timedelta(seconds=30),
        )

    @client.create_function(
        fn_id="job",
        trigger=inngest.TriggerEvent(event="test/job"),
        cancel=[
            inngest.Cancel(event="test/job.stop", if_exp="async.data.jobId == event.data.jobId")
        ],
    )
    async def job(ctx: inngest.Context) -> str:
        job_id = str(ctx.event.data["jobId"])

        async def slow() -> str:
            CALLS[f"{job_id}:slow"] += 1
            await hold(job_id)
            CALLS[f"{job_id}:slow-finished"] += 1
            return "slow"

        async def after() -> str:
            CALLS[f"{job_id}:after"] += 1
            return "after"

        await ctx.step.run("slow", slow)
        return await ctx.step.run("after", after)

    @client.create_function(
        fn_id="job-cleanup",
        trigger=inngest.TriggerEvent(
            event=FUNCTION_CANCELLED_EVENT, expression=f"event.data.function_id == '{APP_ID}-job'"
        ),
    )
    async def job_cleanup(ctx: inngest.Context) -> None:
        SEEN[f"cleanup:{ctx.event.data['run_id']}"] = dict(ctx.event.data)

    return [approval, vague, job, job_cleanup]


@dataclasses.dataclass
class Harness:
    client: inngest.Inngest
    local: LocalInngest

    async def send(self, name: str, **data: Any) -> str:
        """Send through the app's client (the intake); returns the event id."""
        (event_id,) = await self.client.send(inngest.Event(name=name, data=data))
        return event_id

    async def start(self, name: str, **data: Any) -> RunRecord:
        """Send a trigger and return its run once the executor has nothing left to do."""
        event_id = await self.send(name, **data)
        await self.local.wait_idle(timeout=10)
        (run,) = [r for r in self.local.runs() if r.event_id == event_id]
        return run

    def run(self, run_id: str) -> RunRecord:
        (run,) = [r for r in self.local.runs() if r.run_id == run_id]
        return run


@pytest_asyncio.fixture(scope="module")
async def harness() -> AsyncIterator[Harness]:
    async with served_functions(APP_ID, build_functions, retry_backoff=(0.02,)) as served:
        yield Harness(served.client, served.local)


def new_id() -> str:
    return uuid.uuid4().hex


async def test_a_matching_event_resolves_the_wait_with_the_event(harness: Harness) -> None:
    # GIVEN a run parked in wait_for_event
    request_id = new_id()
    run = await harness.start("test/request", requestId=request_id)
    assert run.status == "running"
    [wait] = [w for w in harness.local.waiting() if w.run_id == run.run_id]
    assert (wait.step, wait.event, wait.expression) == ("approval", "test/approved", APPROVAL_IF)
    assert wait.function_id == f"{APP_ID}-approval"
    remaining = wait.expires_at - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(seconds=20) < remaining <= datetime.timedelta(seconds=30)
    # WHEN the awaited event arrives
    approval_id = await harness.send(
        "test/approved", requestId=request_id, verdict="approve", by="ada"
    )
    await harness.local.wait_idle(timeout=10)
    # THEN the step returned that event and the run went on to completion
    done = harness.run(run.run_id)
    assert done.status == "completed"
    assert done.output == {
        "approved": {"requestId": request_id, "verdict": "approve", "by": "ada"},
        "event_id": approval_id,
        "name": "test/approved",
    }
    assert done.attempts["approval"] == 1
    assert CALLS[f"{request_id}:prepare"] == 1
    assert CALLS[f"{request_id}:record"] == 1
    assert [w for w in harness.local.waiting() if w.run_id == run.run_id] == []


async def test_events_that_do_not_match_leave_the_run_waiting(harness: Harness) -> None:
    request_id = new_id()
    run = await harness.start("test/request", requestId=request_id)
    # Another request's approval, this request's rejection, and an event of another name.
    await harness.send("test/approved", requestId=new_id(), verdict="approve")
    await harness.send("test/approved", requestId=request_id, verdict="reject")
    await harness.send("test/other", requestId=request_id, verdict="approve")
    await harness.local.wait_idle(timeout=10)
    assert harness.run(run.run_id).status == "running"
    assert [w.run_id for w in harness.local.waiting()].count(run.run_id) == 1
    assert CALLS[f"{request_id}:record"] == 0
    harness.local.expire_waits(run.run_id)
    await harness.local.wait_idle(timeout=10)


async def test_the_wait_returns_none_once_its_timeout_passes(harness: Harness) -> None:
    # GIVEN a run waiting with the shortest timeout the SDK accepts (1 s)
    request_id = new_id()
    run = await harness.start("test/request", requestId=request_id, timeout_s=1)
    assert run.status == "running"
    # WHEN nothing arrives, THEN the step returns None and the run completes
    done = await harness.local.wait_run(run.run_id, timeout=10)
    assert done.status == "completed"
    assert done.output == {"approved": None}
    assert CALLS[f"{request_id}:record"] == 1


async def test_expire_waits_times_a_long_wait_out_at_once(harness: Harness) -> None:
    run = await harness.start("test/request", requestId=new_id(), timeout_s=3600)
    assert harness.local.expire_waits(run.run_id) == 1
    await harness.local.wait_idle(timeout=10)
    assert harness.run(run.run_id).output == {"approved": None}
    assert harness.local.expire_waits(run.run_id) == 0


async def test_an_event_sent_before_the_wait_began_does_not_count(harness: Harness) -> None:
    # GIVEN a run still in the step before its wait
    request_id = new_id()
    trigger_id = await harness.send("test/request", requestId=request_id, hold=True)
    await asyncio.wait_for(STARTED[request_id].wait(), 10)
    # WHEN the approval arrives early, and only then the run reaches its wait
    await harness.send("test/approved", requestId=request_id, verdict="approve", by="early")
    RELEASE[request_id].set()
    await harness.local.wait_idle(timeout=10)
    # THEN the run waits still; a later approval is the one it gets
    (run,) = [r for r in harness.local.runs() if r.event_id == trigger_id]
    assert run.status == "running"
    assert [w.run_id for w in harness.local.waiting()].count(run.run_id) == 1
    await harness.send("test/approved", requestId=request_id, verdict="approve", by="late")
    await harness.local.wait_idle(timeout=10)
    done = harness.run(run.run_id)
    assert done.status == "completed"
    assert done.output["approved"]["by"] == "late"


async def test_an_event_between_the_last_step_and_the_wait_does_not_count(
    harness: Harness,
) -> None:
    # GIVEN calls to the app that take half a second to arrive, as from Inngest Cloud to a
    # Lambda, and a run whose step before the wait has just run (its output memoized)
    harness.local.call_delay_s = 0.5
    try:
        request_id = new_id()
        trigger_id = await harness.send("test/request", requestId=request_id)
        async with asyncio.timeout(10):
            # Polls: a memoized step output is no change that wait_for() hears.
            while not any(  # noqa: ASYNC110
                r.event_id == trigger_id and "prepare" in r.attempts for r in harness.local.runs()
            ):
                await asyncio.sleep(0.01)
        (run,) = [r for r in harness.local.runs() if r.event_id == trigger_id]
        # WHEN the approval comes now, while the call that would reach the wait is on its way
        assert run.run_id not in [w.run_id for w in harness.local.waiting()]
        sent = asyncio.get_running_loop().time()
        await harness.send("test/approved", requestId=request_id, verdict="approve", by="early")
        await harness.local.wait_for(
            lambda: run.run_id in [w.run_id for w in harness.local.waiting()], timeout=10
        )
        # THEN the wait began only after the delay, and the early approval is not its output
        assert asyncio.get_running_loop().time() - sent >= 0.3
        await harness.local.wait_idle(timeout=10)
        assert harness.run(run.run_id).status == "running"
        await harness.send("test/approved", requestId=request_id, verdict="approve", by="late")
        await harness.local.wait_idle(timeout=10)
    finally:
        harness.local.call_delay_s = 0.0
    done = harness.run(run.run_id)
    assert done.status == "completed"
    assert done.output["approved"]["by"] == "late"


async def test_runs_waiting_on_different_ids_each_get_their_own_event(harness: Harness) -> None:
    first_id, second_id = new_id(), new_id()
    first = await harness.start("test/request", requestId=first_id)
    second = await harness.start("test/request", requestId=second_id)
    twin = await harness.start("test/request", requestId=second_id)
    assert {w.run_id for w in harness.local.waiting()} >= {
        first.run_id,
        second.run_id,
        twin.run_id,
    }
    # One event resolves every run waiting on its id, and no other (sent in-process here).
    harness.local.send(
        {"name": "test/approved", "data": {"requestId": second_id, "verdict": "approve", "by": "b"}}
    )
    await harness.local.wait_idle(timeout=10)
    assert harness.run(second.run_id).output["approved"]["by"] == "b"
    assert harness.run(twin.run_id).output["approved"]["by"] == "b"
    assert harness.run(first.run_id).status == "running"
    await harness.send("test/approved", requestId=first_id, verdict="approve", by="a")
    await harness.local.wait_idle(timeout=10)
    assert harness.run(first.run_id).output["approved"]["by"] == "a"


async def test_a_cancel_event_stops_the_run_after_its_step_in_flight(harness: Harness) -> None:
    # GIVEN a run in the middle of its slow step
    job_id = new_id()
    trigger_id = await harness.send("test/job", jobId=job_id)
    await asyncio.wait_for(STARTED[job_id].wait(), 10)
    (run,) = [r for r in harness.local.runs() if r.event_id == trigger_id]
    # WHEN another job's stop arrives, nothing happens; this job's stop cancels the run
    await harness.send("test/job.stop", jobId=new_id())
    assert harness.run(run.run_id).status == "running"
    await harness.send("test/job.stop", jobId=job_id)
    assert harness.run(run.run_id).status == "cancelled"
    RELEASE[job_id].set()
    await harness.local.wait_idle(timeout=10)
    # THEN the step in flight finished, no later step ran, and the run stays cancelled
    assert CALLS[f"{job_id}:slow-finished"] == 1
    assert CALLS[f"{job_id}:after"] == 0
    cancelled = harness.run(run.run_id)
    assert cancelled.status == "cancelled"
    assert cancelled.output is None
    # AND inngest/function.cancelled reached the function listening for it
    cleanup = SEEN[f"cleanup:{run.run_id}"]
    assert cleanup["function_id"] == f"{APP_ID}-job"
    assert cleanup["event"]["id"] == trigger_id
    assert cleanup["event"]["data"] == {"jobId": job_id}
    assert cleanup["error"]["message"] == "function cancelled"


async def test_cancelling_a_waiting_run_by_id_drops_its_wait(harness: Harness) -> None:
    request_id = new_id()
    run = await harness.start("test/request", requestId=request_id)
    assert harness.local.cancel(run.run_id) is True
    assert [w for w in harness.local.waiting() if w.run_id == run.run_id] == []
    await harness.local.wait_idle(timeout=10)
    # The approval that comes later finds no wait, and the run's later step never runs.
    await harness.send("test/approved", requestId=request_id, verdict="approve")
    await harness.local.wait_idle(timeout=10)
    assert harness.run(run.run_id).status == "cancelled"
    assert CALLS[f"{request_id}:record"] == 0
    assert harness.local.cancel(run.run_id) is False


async def test_cancelling_a_finished_run_is_harmless(harness: Harness) -> None:
    # GIVEN a job run that completed
    job_id = new_id()
    RELEASE[job_id].set()
    run = await harness.start("test/job", jobId=job_id)
    assert run.status == "completed"
    # WHEN its stop event arrives and the API is asked to cancel it
    await harness.send("test/job.stop", jobId=job_id)
    await harness.local.wait_idle(timeout=10)
    assert harness.local.cancel(run.run_id) is False
    # THEN it stays completed, and no cancellation was announced
    after = harness.run(run.run_id)
    assert (after.status, after.output) == ("completed", "after")
    assert f"cleanup:{run.run_id}" not in SEEN
    with pytest.raises(KeyError):
        harness.local.cancel("no-such-run")


async def test_an_unsupported_wait_expression_fails_the_run_clearly(harness: Harness) -> None:
    run = await harness.start("test/vague")
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "LocalInngestUnsupported"
    assert "async.data.amount > 10" in run.error["message"]
    assert "big-order" in run.error["message"]


def test_an_unsupported_cancel_expression_is_refused_at_construction() -> None:
    client = inngest.Inngest(app_id=APP_ID, is_production=True, signing_key="signkey-test-00")

    @client.create_function(
        fn_id="fuzzy",
        trigger=inngest.TriggerEvent(event="test/fuzzy"),
        cancel=[inngest.Cancel(event="test/stop", if_exp="async.data.id != event.data.id")],
    )
    async def fuzzy(ctx: inngest.Context) -> None:
        return None

    with pytest.raises(ValueError, match=r"fuzzy: cancel on 'test/stop'.*refusing"):
        LocalInngest(
            serve_url="http://127.0.0.1:1/api/inngest",
            signing_key="signkey-test-00",
            event_key="key",
            functions=[fuzzy],
            app_id=APP_ID,
        )
