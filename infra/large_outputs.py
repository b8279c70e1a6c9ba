"""Every tool output a run carries is bounded: past its bound it goes to S3, or is cut short.

Inngest keeps every step output in the run's state, with limits
(https://www.inngest.com/docs/usage-limits/inngest): "The limit for data returned by a step is
4MB", "Function run state cannot exceed 32MB" (its events, every step's output, the function's
return value), "The maximum number of steps allowed per function is 1000". A step over a limit
fails, and so does the turn. So each tool step's output is bounded, and so is each round's:

* An output may take LARGE_OUTPUT_BYTES (256 KB) of a step, and the outputs of one round share
  TOOL_ROUND_BUDGET_BYTES (infra/settings.py): the calls of a round run as parallel steps that
  cannot see each other, so each gets `output_bound` = min(256 KB, budget / calls run), which
  every step computes alike from the plan. A turn's rounds then hold at most MAX_TOOL_ROUNDS
  times the budget of the run's state, which settings keep within 24 MB.
* Past its bound, an output is written once to S3 when LARGE_OUTPUT_BUCKET is set: what travels
  (the step output, the stored result, the ToolMessage the model reads) is a preview with the
  object's address. The bucket's lifecycle rule (serverless.yml) expires the objects under
  `tool-outputs/` after 30 days.
* Without a bucket it is cut short: the first characters that fit, after a line that tells the
  model so. Either way, the tool's progress entry carries a note that tells the user.

Sizes are counted as the output travels: as JSON, the SDK escaping every non-ASCII character
(`\\uXXXX`, six bytes) and Inngest's encoder `<`, `>` and `&` (six bytes each). A cut falls
between characters, so no UTF-8 sequence is ever split.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

logger = logging.getLogger(__name__)

LARGE_OUTPUT_BYTES = 256 * 1024
PREVIEW_CHARS = 4000
KEY_PREFIX = "tool-outputs/"
CONTENT_TYPE = "text/plain; charset=utf-8"


class OutputRef(TypedDict):
    """Where a large output is and what it was."""

    uri: str
    bytes: int
    sha256: str


class Shrunk(TypedDict):
    content: str  # what the model reads
    artifact: OutputRef | None  # where the whole output is, if it was stored
    note: str  # what the user is told


def encoded_bytes(text: str) -> int:
    """The bytes `text` takes in a step output."""
    escaped = sum(text.count(c) for c in "<>&")
    return len(json.dumps(text)) - 2 + 5 * escaped


def prefix_within(text: str, max_bytes: int) -> str:
    """The longest start of `text` that takes at most `max_bytes` in a step output."""
    if encoded_bytes(text) <= max_bytes:
        return text
    # Every character takes at least a byte: the cut is within the first max_bytes characters.
    low, high = 0, min(len(text), max(max_bytes, 0))
    while low < high:
        middle = (low + high + 1) // 2
        if encoded_bytes(text[:middle]) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def output_bound(round_budget: int, calls: int) -> int:
    """The bytes each output of a round of `calls` calls may take."""
    return min(LARGE_OUTPUT_BYTES, round_budget // max(calls, 1))


def size_text(n: int) -> str:
    if n < 1024 * 1024:
        return f"{n / 1024:,.0f} KB"
    return f"{n / (1024 * 1024):,.1f} MB"


def object_key(job_key: str, tool_call_id: str, sha256: str) -> str:
    # The digest keeps concurrent attempts of one call apart: each reference names exactly the
    # bytes it describes, whichever attempt's result is stored first. The others' objects expire.
    return f"{KEY_PREFIX}{job_key}/{tool_call_id}/{sha256[:16]}.txt"


def preview(name: str, content: str, ref: OutputRef, limit: int) -> Shrunk:
    """What travels for an output stored at `ref`: its start, within `limit`."""

    def head(kept: int) -> str:
        return (
            f"[{name} returned {size_text(ref['bytes'])}; the first {kept:,} characters"
            f" follow. The whole output is stored at {ref['uri']}.]\n"
        )

    shown = prefix_within(content[:PREVIEW_CHARS], limit - encoded_bytes(head(PREVIEW_CHARS)))
    note = (
        f"The output ({size_text(ref['bytes'])}) is stored whole; the assistant read its first"
        f" {len(shown):,} characters."
    )
    return Shrunk(content=head(len(shown)) + shown, artifact=ref, note=note)


def truncated(name: str, content: str, size: int, limit: int) -> Shrunk:
    """What travels for an output cut to fit `limit`: a line that says so, then its start."""

    def head(kept: int) -> str:
        return (
            f"[{name} returned {size_text(size)}; only the first {kept:,} characters are kept,"
            f" as a tool result may take at most {size_text(limit)} here.]\n"
        )

    kept = prefix_within(content, limit - encoded_bytes(head(len(content))))
    note = f"The output ({size_text(size)}) was cut to its first {len(kept):,} characters."
    return Shrunk(content=head(len(kept)) + kept, artifact=None, note=note)


class LargeOutputs:
    """Bounds tool outputs: past its bound an output goes to `bucket`, or without one is cut."""

    def __init__(self, bucket: str | None) -> None:
        self.bucket = bucket
        self._client: S3Client | None = None

    def _s3(self) -> S3Client:
        if self._client is None:
            # Imported on first use: boto3 costs a few hundred milliseconds to load.
            import boto3

            self._client = boto3.client("s3")
        return self._client

    async def shrink(
        self,
        *,
        job_key: str,
        call_id: str,
        name: str,
        content: str,
        limit: int = LARGE_OUTPUT_BYTES,
    ) -> Shrunk | None:
        """What to carry instead of `content` so that it takes at most `limit` bytes of a step
        output; None to carry it whole."""
        if encoded_bytes(content) <= limit:
            return None
        data = content.encode()
        log = {"job_id": job_key, "tool_call_id": call_id, "bytes": len(data), "limit": limit}
        if self.bucket is None:
            logger.warning("tool output cut short: LARGE_OUTPUT_BUCKET is not set", extra=log)
            return truncated(name, content, len(data), limit)
        digest = hashlib.sha256(data).digest()
        key = object_key(job_key, call_id, digest.hex())
        await asyncio.to_thread(
            self._s3().put_object,
            Bucket=self.bucket,
            Key=key,
            Body=data,
            ContentType=CONTENT_TYPE,
            # S3 refuses the write unless the bytes it received hash to this.
            ChecksumSHA256=base64.b64encode(digest).decode(),
        )
        ref = OutputRef(uri=f"s3://{self.bucket}/{key}", bytes=len(data), sha256=digest.hex())
        logger.info("large tool output stored in S3", extra=log)
        return preview(name, content, ref, limit)

    async def delete(self, uri: str) -> None:
        """Delete the object at `uri` (an `s3://bucket/key` this class wrote): its tool result
        was erased (infra/store/erasures.py). Deleting one that is gone already succeeds."""
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        await asyncio.to_thread(self._s3().delete_object, Bucket=bucket, Key=key)
