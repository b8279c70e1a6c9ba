"""Tool outputs too large to travel with the run go to S3; a reference and a preview travel.

Inngest keeps every step output in the run's state and the checkpoint keeps every message, so a
tool result over 256 KB is written once to S3 and what travels (the step output, the stored
result, the ToolMessage the model reads) is a preview with the object's address. The bucket's
lifecycle rule (serverless.yml) expires the objects under `tool-outputs/` after 30 days.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
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
    artifact: OutputRef


def object_key(job_key: str, tool_call_id: str, sha256: str) -> str:
    # The digest keeps concurrent attempts of one call apart: each reference names exactly the
    # bytes it describes, whichever attempt's result is stored first. The others' objects expire.
    return f"{KEY_PREFIX}{job_key}/{tool_call_id}/{sha256[:16]}.txt"


def preview_text(name: str, content: str, ref: OutputRef) -> str:
    return (
        f"[{name} returned {ref['bytes'] / 1024:,.0f} KB; the first {PREVIEW_CHARS:,} characters"
        f" follow. The whole output is stored at {ref['uri']}.]\n{content[:PREVIEW_CHARS]}"
    )


class LargeOutputs:
    """Writes outputs over LARGE_OUTPUT_BYTES to `bucket`; without a bucket they stay inline."""

    def __init__(self, bucket: str | None) -> None:
        self.bucket = bucket
        self._client: S3Client | None = None

    def _s3(self) -> S3Client:
        if self._client is None:
            # Imported on first use: boto3 costs a few hundred milliseconds to load.
            import boto3

            self._client = boto3.client("s3")
        return self._client

    async def shrink(self, *, job_key: str, call_id: str, name: str, content: str) -> Shrunk | None:
        """The reference and preview to carry instead of `content`, or None to carry it whole."""
        data = content.encode()
        if len(data) <= LARGE_OUTPUT_BYTES:
            return None
        if self.bucket is None:
            logger.warning(
                "large tool output kept inline: LARGE_OUTPUT_BUCKET is not set",
                extra={"job_id": job_key, "tool_call_id": call_id, "bytes": len(data)},
            )
            return None
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
        logger.info(
            "large tool output stored in S3",
            extra={"job_id": job_key, "tool_call_id": call_id, "bytes": len(data)},
        )
        return Shrunk(content=preview_text(name, content, ref), artifact=ref)
