"""The HMAC signatures Inngest and the SDK exchange, and the canonical bodies they cover."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
import urllib.parse

import jcs  # type: ignore[import-untyped]


def sign_body(body: bytes, signing_key: str, unix_s: int | None = None) -> str:
    """``X-Inngest-Signature`` for a JCS-canonical body, as the SDK recomputes it."""
    ts = int(time.time()) if unix_s is None else unix_s
    mac = hmac.new(_secret(signing_key), body + str(ts).encode(), hashlib.sha256)
    return f"t={ts}&s={mac.hexdigest()}"


def signed_by_sdk(body: bytes, signature_header: str, signing_key: str) -> bool:
    """Whether a response body carries the SDK's signature under ``signing_key``."""
    parsed = urllib.parse.parse_qs(signature_header)
    ts, sig = parsed.get("t", [""])[0], parsed.get("s", [""])[0]
    mac = hmac.new(_secret(signing_key), body + ts.encode(), hashlib.sha256)
    return bool(sig) and hmac.compare_digest(sig.encode(), mac.hexdigest().encode())


def canonical_json(value: object) -> bytes:
    # The SDK verifies the HMAC over the JCS form of whatever body it receives, so
    # sending the canonical bytes themselves makes "signed" and "sent" identical.
    out = jcs.canonicalize(value)
    if not isinstance(out, bytes):
        raise TypeError("jcs.canonicalize did not return bytes")
    return out


def _secret(signing_key: str) -> bytes:
    # Mirrors the SDK: the `signkey-<env>-` prefix is dropped and the rest is used as
    # UTF-8 text (not hex-decoded).
    return re.sub(r"^signkey-\w+-", "", signing_key, count=1).encode()
