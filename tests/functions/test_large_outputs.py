"""Tool outputs are bounded through the whole stack: past its bound an output goes to S3 (moto)
or, without a bucket, is cut short with a note that the model and the user both see; a round's
outputs share its budget."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from mypy_boto3_s3 import S3Client
from mypy_boto3_s3.type_defs import LifecycleRuleTypeDef

from demo.tools import report
from infra.large_outputs import (
    KEY_PREFIX,
    LARGE_OUTPUT_BYTES,
    PREVIEW_CHARS,
    LargeOutputs,
    encoded_bytes,
    output_bound,
)
from infra.settings import Settings
from tests.support import (
    TOOL_OUTPUT_BUCKET,
    Stack,
    create_user_with_chat,
    durable_messages,
    fetch,
    helper_with,
    running_stack,
    stored_objects,
    token_for,
)

BUCKET = TOOL_OUTPUT_BUCKET
SERVERLESS_YML = Path(__file__).resolve().parents[2] / "serverless.yml"
# What a tool step's output holds besides the content: the call's id, name, status, note and
# the S3 reference.
ENVELOPE_BYTES = 1024


async def history_reply(stack: Stack, user_id: uuid.UUID, chat_id: uuid.UUID) -> dict[str, Any]:
    """The reply as the user's client reads it: GET /api/chat/{chatId}/history."""
    messages = await stack.messages(token_for(user_id), chat_id)
    [reply] = [m for m in messages if m["role"] == "assistant"]
    return reply


async def tool_messages(database_url: str, chat_id: uuid.UUID) -> list[ToolMessage]:
    """The results as the model's next round read them: the thread's durable checkpoint."""
    return [m for m in await durable_messages(database_url, chat_id) if isinstance(m, ToolMessage)]


async def test_a_turn_with_200_kb_of_tool_output_carries_it_whole(database_url: str) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "/report 200"})
        await stack.executor.wait_idle()
        run = stack.handoff_run()
        reply = await history_reply(stack, user_id, chat_id)
    assert run.status == "completed", run.error
    full = report.invoke({"input": "200"})
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert (result["content"], result["artifact"], result["note"]) == (full, None, None)
    [tool_message] = await tool_messages(database_url, chat_id)
    assert tool_message.content == full
    assert reply["status"] == "completed"
    assert reply["progress"] == [
        {"id": result["tool_call_id"], "name": "report", "status": "completed"}
    ]
    assert run.step_bytes[f"tool-{result['tool_call_id']}"] <= encoded_bytes(full) + ENVELOPE_BYTES


@pytest.mark.parametrize(("kb", "size"), [(300, "300 KB"), (3072, "3.0 MB")])
async def test_a_large_output_is_stored_in_s3_and_travels_as_a_preview(
    database_url: str, s3: S3Client, kb: int, size: str
) -> None:
    # GIVEN a stack whose large outputs go to the bucket
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, large_output_bucket=BUCKET) as stack:
        # WHEN the agent runs a tool that returns more than a step may carry
        await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": f"/report {kb}"}
        )
        await stack.executor.wait_idle()
        run = stack.handoff_run()
        reply = await history_reply(stack, user_id, chat_id)
    assert run.status == "completed", run.error

    # THEN the whole output is in S3 once, under the job and the tool call id
    full = report.invoke({"input": str(kb)}).encode()
    assert len(full) == kb * 1024 > LARGE_OUTPUT_BYTES
    [job] = await fetch(database_url, "select idempotency_key from job_runs")
    [(key, body)] = stored_objects(s3).items()
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert key.startswith(f"{KEY_PREFIX}{job['idempotency_key']}/{result['tool_call_id']}/")
    assert body == full
    head = s3.head_object(Bucket=BUCKET, Key=key)
    assert head["ContentType"] == "text/plain; charset=utf-8"

    # AND the step output (the stored result) carries the reference and a preview
    ref = result["artifact"]
    assert ref == {
        "uri": f"s3://{BUCKET}/{key}",
        "bytes": len(full),
        "sha256": hashlib.sha256(full).hexdigest(),
    }
    assert result["content"] == (
        f"[report returned {size}; the first {PREVIEW_CHARS:,} characters follow. The whole"
        f" output is stored at {ref['uri']}.]\n{full.decode()[:PREVIEW_CHARS]}"
    )
    assert run.step_bytes[f"tool-{result['tool_call_id']}"] < PREVIEW_CHARS + ENVELOPE_BYTES

    # AND so does the checkpoint: the model read the preview, the artifact names the object
    [tool_message] = await tool_messages(database_url, chat_id)
    assert tool_message.content == result["content"]
    assert tool_message.artifact == ref

    # AND the final answer quotes the preview, with the object's address
    assert reply["status"] == "completed"
    assert ref["uri"] in reply["content"]
    assert len(reply["content"]) < 2 * PREVIEW_CHARS

    # AND the user is told the assistant read only the start
    [progress] = reply["progress"]
    assert progress["note"] == (
        f"The output ({size}) is stored whole; the assistant read its first"
        f" {PREVIEW_CHARS:,} characters."
    )


async def test_without_a_bucket_a_3_mb_output_is_cut_short_with_a_note(database_url: str) -> None:
    # GIVEN a stack without a bucket (development)
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        # WHEN a tool returns 3 MB
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "/report 3072"})
        await stack.executor.wait_idle()
        run = stack.handoff_run()
        reply = await history_reply(stack, user_id, chat_id)
    assert run.status == "completed", run.error
    full = report.invoke({"input": "3072"})

    # THEN the model's next round read its start, after a line that says it was cut short
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    [tool_message] = await tool_messages(database_url, chat_id)
    assert tool_message.content == result["content"]
    head, kept = result["content"].split("\n", 1)
    assert head == (
        f"[report returned 3.0 MB; only the first {len(kept):,} characters are kept, as a tool"
        " result may take at most 256 KB here.]"
    )
    assert full.startswith(kept)
    assert result["artifact"] is None

    # AND it fills, and stays within, what one output may take of the step and the run
    assert LARGE_OUTPUT_BYTES - 100 < encoded_bytes(result["content"]) <= LARGE_OUTPUT_BYTES
    assert run.step_bytes[f"tool-{result['tool_call_id']}"] <= LARGE_OUTPUT_BYTES + ENVELOPE_BYTES
    assert run.state_bytes < 2 * LARGE_OUTPUT_BYTES

    # AND the answer the model wrote from it passes the note on
    assert reply["status"] == "completed"
    assert head in reply["content"]

    # AND the user sees the note on the call's progress entry
    note = f"The output (3.0 MB) was cut to its first {len(kept):,} characters."
    assert result["note"] == note
    assert reply["progress"] == [
        {"id": result["tool_call_id"], "name": "report", "status": "completed", "note": note}
    ]


def test_by_default_a_full_round_gets_128_kib_per_output() -> None:
    settings = Settings(database_url=None)
    bound = output_bound(settings.tool_round_budget_bytes, settings.max_parallel_tool_calls)
    assert bound == 128 * 1024
    # Eight such rounds take 16 MiB of Inngest's 32 MiB run state.
    assert settings.max_tool_rounds * settings.tool_round_budget_bytes == 16 * 1024 * 1024
    # A round of few calls is bounded by what one output may take.
    assert output_bound(settings.tool_round_budget_bytes, 2) == LARGE_OUTPUT_BYTES


@tool
def postcards(input: str) -> str:
    """N postcards of accented words, emoji and markup (multi-byte and escaped characters)."""
    return "Grüße aus Köln 😀 <b>&</b>\n" * int(input)


async def test_an_output_of_multibyte_text_is_cut_between_characters(database_url: str) -> None:
    # GIVEN a tool whose output is mostly characters of 2 to 4 UTF-8 bytes, and `<`, `>`, `&`,
    # each of which a step output takes as a six- or twelve-byte escape
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, assistants=helper_with([postcards])) as stack:
        await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/postcards 8000"}
        )
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    assert run.status == "completed", run.error
    full = postcards.invoke({"input": "8000"})
    assert len(full.encode()) < LARGE_OUTPUT_BYTES < encoded_bytes(full)

    # THEN it is cut by what it takes as JSON, not by its UTF-8 bytes, and between characters
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    _, kept = result["content"].split("\n", 1)
    assert full.startswith(kept)
    assert kept.encode().decode() == kept
    assert LARGE_OUTPUT_BYTES - 12 - 200 < encoded_bytes(result["content"]) <= LARGE_OUTPUT_BYTES
    assert run.step_bytes[f"tool-{result['tool_call_id']}"] <= LARGE_OUTPUT_BYTES + ENVELOPE_BYTES


async def test_outputs_within_256_kb_stay_inline(database_url: str, s3: S3Client) -> None:
    # 252 KB of report lines take 262,080 bytes as JSON (each newline escaped): within 256 KiB.
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, large_output_bucket=BUCKET) as stack:
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "/report 252"})
        await stack.executor.wait_idle()
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert result["artifact"] is None
    assert result["content"] == report.invoke({"input": "252"})
    assert encoded_bytes(result["content"]) <= LARGE_OUTPUT_BYTES
    assert stored_objects(s3) == {}


async def test_a_round_past_its_budget_bounds_every_output(database_url: str) -> None:
    # GIVEN a round budget of 128 KiB (a sixteenth of the default, to keep the answer the
    # scripted model quotes short), and a model that asks for 10 reports of 40 KB at once
    budget, calls = 128 * 1024, 10
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, tool_round_budget_bytes=budget) as stack:
        content = "\n".join(["/report 40"] * calls)
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": content})
        await stack.executor.wait_idle()
        run = stack.handoff_run()
        reply = await history_reply(stack, user_id, chat_id)

    # THEN the turn completes, each call having run as its own step
    assert run.status == "completed", run.error
    tool_steps = {name: size for name, size in run.step_bytes.items() if name.startswith("tool-")}
    assert len(tool_steps) == calls

    # AND each output was cut to its even share of the budget, with a note
    share = budget // calls
    full = report.invoke({"input": "40"})
    assert encoded_bytes(full) * calls > budget
    results = await tool_messages(database_url, chat_id)
    assert len(results) == calls
    for message in results:
        head, kept = str(message.content).split("\n", 1)
        assert head.startswith("[report returned 40 KB; only the first")
        assert full.startswith(kept)
        assert share - 100 < encoded_bytes(str(message.content)) <= share
    # AND together the round's step outputs stay within its budget
    assert sum(tool_steps.values()) <= budget + calls * ENVELOPE_BYTES
    assert reply["status"] == "completed"
    assert [p["status"] for p in reply["progress"]] == ["completed"] * calls
    assert all(p["note"].startswith("The output (40 KB) was cut") for p in reply["progress"])

    # AND the plans and the other steps stay small: the run's state is its tool outputs
    others = {name: size for name, size in run.step_bytes.items() if name not in tool_steps}
    assert set(others) == {"claim", "model-round-0", "finalize"}
    assert all(size < 4 * 1024 for size in others.values()), others
    assert run.state_bytes < budget + calls * ENVELOPE_BYTES + 4 * 4 * 1024


def deployed_lifecycle_rules() -> list[LifecycleRuleTypeDef]:
    """The bucket's lifecycle rules as serverless.yml declares them, in the S3 API's shape."""
    template = yaml.safe_load(SERVERLESS_YML.read_text())
    bucket = template["resources"]["Resources"]["LargeOutputBucket"]
    return [
        {
            "ID": rule["Id"],
            "Status": rule["Status"],
            "Filter": {"Prefix": rule.get("Prefix", "")},
            "Expiration": {"Days": rule["ExpirationInDays"]},
        }
        for rule in bucket["Properties"]["LifecycleConfiguration"]["Rules"]
        if "ExpirationInDays" in rule
    ]


async def test_the_deployed_lifecycle_rule_expires_every_stored_output(s3: S3Client) -> None:
    # GIVEN the bucket with the lifecycle configuration serverless.yml deploys
    s3.put_bucket_lifecycle_configuration(
        Bucket=BUCKET, LifecycleConfiguration={"Rules": deployed_lifecycle_rules()}
    )

    # WHEN a large output is stored
    shrunk = await LargeOutputs(BUCKET).shrink(
        job_key="job-1", call_id="call_1", name="report", content="x" * (LARGE_OUTPUT_BYTES + 1)
    )

    # THEN exactly one enabled rule covers its key, and it expires the object after 30 days
    assert shrunk is not None
    assert shrunk["artifact"] is not None
    key = shrunk["artifact"]["uri"].removeprefix(f"s3://{BUCKET}/")
    rules = s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]
    covering = [
        rule
        for rule in rules
        if rule["Status"] == "Enabled" and key.startswith(rule.get("Filter", {}).get("Prefix", ""))
    ]
    assert [rule.get("Expiration", {}).get("Days") for rule in covering] == [30]


async def test_tool_outputs_past_the_public_body_limit_reach_the_next_round(
    database_url: str,
) -> None:
    # GIVEN two tools whose outputs add up to more than the public 64,000-byte body limit,
    # which Inngest's calls to the endpoint then carry
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        events = await stack.respond(
            token_for(user_id), {"chatId": str(chat_id), "content": "/report 40\n/report 40"}
        )
        await stack.executor.wait_idle()
        run = stack.handoff_run()
    # THEN the endpoint takes them, and the turn completes
    assert run.status == "completed"
    [reply] = await fetch(
        database_url,
        "select status from message where id = %s",
        events[-1][1]["assistantMessageId"],
    )
    assert reply["status"] == "completed"
