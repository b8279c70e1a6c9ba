"""LocalInngest holds runs to Inngest's limits: step output size, run state size, step count."""

from __future__ import annotations

import collections
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import inngest
import pytest_asyncio

from devkit.local_inngest import FUNCTION_ATTEMPT_KEY, Limits, RunRecord
from devkit.local_inngest.limits import STATE_BYTES, STEP_OUTPUT_BYTES, STEPS, stored_bytes
from tests.devkit.executor_harness import Served, served_functions

APP_ID = "local-inngest-limits-test"
# A state limit a few small outputs pass: the event, then two outputs of 1 KB fit; a third not.
SMALL = Limits(state_bytes=2600, steps=3)

CALLS: collections.Counter[str] = collections.Counter()
FAILURES: dict[str, dict[str, Any]] = {}


def number(ctx: inngest.Context, key: str) -> int:
    return int(str(ctx.event.data[key]))


def build_functions(client: inngest.Inngest) -> list[inngest.Function[Any]]:
    async def on_failure(ctx: inngest.Context) -> None:
        FAILURES[str(ctx.event.data["run_id"])] = json.loads(json.dumps(ctx.event.data["error"]))

    @client.create_function(
        fn_id="sized",
        retries=1,
        on_failure=on_failure,
        trigger=inngest.TriggerEvent(event="test/sized"),
    )
    async def sized(ctx: inngest.Context) -> int:
        """One step returning `size` characters, then a second one."""

        async def output() -> str:
            CALLS[f"{ctx.run_id}:output"] += 1
            return "x" * number(ctx, "size")

        async def after() -> str:
            CALLS[f"{ctx.run_id}:after"] += 1
            return "ok"

        await ctx.step.run("output", output)
        await ctx.step.run("after", after)
        return 0

    @client.create_function(
        fn_id="many",
        retries=1,
        on_failure=on_failure,
        trigger=inngest.TriggerEvent(event="test/many"),
    )
    async def many(ctx: inngest.Context) -> int:
        """`count` steps of `size` characters each, one after another."""

        def step(n: int) -> Callable[[], Awaitable[str]]:
            async def body() -> str:
                CALLS[f"{ctx.run_id}:{n}"] += 1
                return "y" * number(ctx, "size")

            return body

        for n in range(number(ctx, "count")):
            await ctx.step.run(f"step-{n}", step(n))
        return number(ctx, "count")

    @client.create_function(
        fn_id="fan-out",
        retries=1,
        on_failure=on_failure,
        trigger=inngest.TriggerEvent(event="test/fan-out"),
    )
    async def fan_out(ctx: inngest.Context) -> int:
        """`count` parallel steps."""

        def branch(n: int) -> Callable[[], Awaitable[int]]:
            async def body() -> int:
                CALLS[f"{ctx.run_id}:{n}"] += 1
                return n

            return lambda: ctx.step.run(f"branch-{n}", body)

        results = await ctx.group.parallel(tuple(branch(n) for n in range(number(ctx, "count"))))
        return len(results)

    return [sized, many, fan_out]


@pytest_asyncio.fixture(scope="module")
async def inngest_limits() -> AsyncIterator[Served]:
    async with served_functions(APP_ID, build_functions, retry_backoff=(0.01,)) as served:
        yield served


@pytest_asyncio.fixture(scope="module")
async def small_limits() -> AsyncIterator[Served]:
    async with served_functions(
        APP_ID, build_functions, retry_backoff=(0.01,), limits=SMALL
    ) as served:
        yield served


async def run_of(served: Served, name: str, data: dict[str, Any]) -> RunRecord:
    [event_id] = await served.client.send(inngest.Event(name=name, data=data))
    await served.local.wait_idle(timeout=60)
    [run] = [
        r
        for r in served.local.runs()
        if r.event_id == event_id and not r.function_id.endswith("-failure")
    ]
    return run


def test_the_default_limits_are_inngests() -> None:
    assert (Limits().step_output_bytes, Limits().state_bytes, Limits().steps) == (
        STEP_OUTPUT_BYTES,
        STATE_BYTES,
        STEPS,
    )
    assert (STEP_OUTPUT_BYTES, STATE_BYTES, STEPS) == (4 * 1024**2, 32 * 1024**2, 1000)


def test_sizes_are_counted_as_inngest_stores_them() -> None:
    # Compact JSON, non-ASCII as the SDK's \u escapes, and Go's HTML escaping of < > &.
    assert stored_bytes({"data": "ab"}) == len('{"data":"ab"}')
    assert stored_bytes({"data": "é"}) == len('{"data":"\\u00e9"}')
    assert stored_bytes({"data": "<&>"}) == len('{"data":"\\u003c\\u0026\\u003e"}')


async def test_a_step_output_up_to_4_mib_is_stored(inngest_limits: Served) -> None:
    size = STEP_OUTPUT_BYTES - len('{"data":""}')
    run = await run_of(inngest_limits, "test/sized", {"size": size})
    assert run.status == "completed", run.error
    assert run.step_bytes["output"] == STEP_OUTPUT_BYTES


async def test_a_step_output_over_4_mib_fails_its_attempts_then_the_run(
    inngest_limits: Served,
) -> None:
    # GIVEN a step that returns one byte more than Inngest stores
    size = STEP_OUTPUT_BYTES - len('{"data":""}') + 1
    run = await run_of(inngest_limits, "test/sized", {"size": size})

    # THEN each attempt is an error (the step ran on each), and the run failed after the last
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "Error"
    assert run.error["message"].startswith("error validating generator opcode ")
    assert run.error["message"].endswith(": step output size is greater than the limit")
    assert CALLS[f"{run.run_id}:output"] == 2  # retries=1
    assert run.attempts[FUNCTION_ATTEMPT_KEY] == 2
    # AND nothing of it was stored, the next step never ran, and on_failure heard of it
    assert "output" not in run.step_bytes
    assert CALLS[f"{run.run_id}:after"] == 0
    assert FAILURES[run.run_id]["message"] == run.error["message"]


async def test_a_run_whose_state_would_pass_the_limit_fails_at_once(small_limits: Served) -> None:
    # GIVEN steps of 1 KB each, and a state limit that holds the event and two of them
    run = await run_of(small_limits, "test/many", {"count": 3, "size": 1000})

    # THEN the third output fails the run at once: no retry, nothing more stored
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "InngestErrStateOverflowed"
    assert run.error["message"] == (
        f"The function run exceeded the state size limit of {SMALL.state_bytes} bytes."
    )
    assert [CALLS[f"{run.run_id}:{n}"] for n in range(3)] == [1, 1, 1]
    assert set(run.step_bytes) == {"step-0", "step-1"}
    assert run.step_bytes["step-0"] == len('{"data":""}') + 1000
    assert run.state_bytes <= SMALL.state_bytes
    # AND the state holds the event and the two outputs stored
    assert 0 < run.state_bytes - sum(run.step_bytes.values()) < 200
    assert FAILURES[run.run_id]["name"] == "InngestErrStateOverflowed"


async def test_a_run_that_stored_its_last_allowed_step_makes_no_further_request(
    small_limits: Served,
) -> None:
    # GIVEN a function of five steps and a limit of three
    run = await run_of(small_limits, "test/many", {"count": 5, "size": 1})

    # THEN three ran, the fourth was never asked for, and the run failed at once
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "InngestErrFunctionOverflowed"
    assert run.error["message"] == "The function run exceeded the step limit of 3 steps."
    assert [CALLS[f"{run.run_id}:{n}"] for n in range(5)] == [1, 1, 1, 0, 0]
    assert FAILURES[run.run_id]["name"] == "InngestErrFunctionOverflowed"


async def test_a_function_of_exactly_the_step_limit_cannot_return(small_limits: Served) -> None:
    run = await run_of(small_limits, "test/many", {"count": 3, "size": 1})
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "InngestErrFunctionOverflowed"
    assert [CALLS[f"{run.run_id}:{n}"] for n in range(3)] == [1, 1, 1]


async def test_planning_more_than_1000_steps_at_once_fails_the_run(
    inngest_limits: Served,
) -> None:
    run = await run_of(inngest_limits, "test/fan-out", {"count": STEPS + 1})
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["name"] == "InngestErrFunctionOverflowed"
    assert run.error["message"] == "The function run exceeded the step limit of 1000 steps."
    assert not any(CALLS[f"{run.run_id}:{n}"] for n in range(STEPS + 1))


async def test_runs_within_the_limits_complete(small_limits: Served) -> None:
    run = await run_of(small_limits, "test/fan-out", {"count": 2})
    assert run.status == "completed", run.error
    assert run.output == 2
    assert set(run.step_bytes) == {"branch-0", "branch-1"}
