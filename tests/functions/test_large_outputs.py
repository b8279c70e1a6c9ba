"""Tool outputs over 256 KB go to S3 (moto); the run, the checkpoint and the model see a preview."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml
from langchain_core.messages import ToolMessage
from moto import mock_aws
from mypy_boto3_s3 import S3Client
from mypy_boto3_s3.type_defs import LifecycleRuleTypeDef

from agent.tools import report
from infra.large_outputs import KEY_PREFIX, LARGE_OUTPUT_BYTES, PREVIEW_CHARS, LargeOutputs
from tests.support import create_user_with_chat, durable_messages, fetch, running_stack, token_for

BUCKET = "handoff-tool-outputs-test"
SERVERLESS_YML = Path(__file__).resolve().parents[2] / "serverless.yml"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Client]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
        yield client


def stored_objects(s3: S3Client) -> dict[str, bytes]:
    listing = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listing}


async def test_a_large_output_is_stored_in_s3_and_travels_as_a_preview(
    database_url: str, s3: S3Client
) -> None:
    # GIVEN a stack whose large outputs go to the bucket
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, large_output_bucket=BUCKET) as stack:
        # WHEN the agent runs a tool that returns 300 KB
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "/report 300"})
        await stack.executor.wait_idle()
        [run] = stack.executor.runs()
    assert run.status == "completed"

    # THEN the whole output is in S3 once, under the job and the tool call id
    full = report.invoke({"input": "300"}).encode()
    assert len(full) == 300 * 1024 > LARGE_OUTPUT_BYTES
    [job] = await fetch(database_url, "select idempotency_key from job_runs")
    [(key, body)] = stored_objects(s3).items()
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert key.startswith(f"{KEY_PREFIX}{job['idempotency_key']}/{result['tool_call_id']}/")
    assert body == full
    head = s3.head_object(Bucket=BUCKET, Key=key)
    assert head["ContentType"] == "text/plain; charset=utf-8"

    # AND the step output (the stored result) carries the reference and a preview, not 300 KB
    ref = result["artifact"]
    assert ref == {
        "uri": f"s3://{BUCKET}/{key}",
        "bytes": len(full),
        "sha256": hashlib.sha256(full).hexdigest(),
    }
    assert len(result["content"]) < PREVIEW_CHARS + 300
    assert ref["uri"] in result["content"]
    assert full.decode()[:PREVIEW_CHARS] in result["content"]

    # AND so does the checkpoint: the model read the preview, the artifact names the object
    [tool_message] = [
        m for m in await durable_messages(database_url, chat_id) if isinstance(m, ToolMessage)
    ]
    assert tool_message.content == result["content"]
    assert tool_message.artifact == ref

    # AND the final answer quotes the preview, with the object's address
    [message] = await fetch(database_url, "select * from message where role = 'assistant'")
    assert message["status"] == "completed"
    assert ref["uri"] in message["content"]
    assert len(message["content"]) < 2 * PREVIEW_CHARS


async def test_outputs_up_to_256_kb_stay_inline(database_url: str, s3: S3Client) -> None:
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url, large_output_bucket=BUCKET) as stack:
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "/report 256"})
        await stack.executor.wait_idle()
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert result["artifact"] is None
    assert result["content"] == report.invoke({"input": "256"})
    assert stored_objects(s3) == {}


async def test_without_a_bucket_a_large_output_stays_whole(database_url: str) -> None:
    # Development has no bucket: nothing is lost, the output is carried inline.
    user_id, chat_id = await create_user_with_chat(database_url)
    async with running_stack(database_url) as stack:
        await stack.respond(token_for(user_id), {"chatId": str(chat_id), "content": "/report 300"})
        await stack.executor.wait_idle()
    [result] = await fetch(database_url, "select * from handoff.tool_results")
    assert result["artifact"] is None
    assert result["content"] == report.invoke({"input": "300"})


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
    assert run.status == "completed", run.error
    [reply] = await fetch(
        database_url,
        "select status from message where id = %s",
        events[-1][1]["assistantMessageId"],
    )
    assert reply["status"] == "completed"
