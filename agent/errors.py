"""What a provider's error means for the person waiting on the answer.

Provider packages raise their own exception types (openai's, anthropic's, …), which agent/ does
not import: an error is read by what every one of them carries, an HTTP status code, response
headers and a request id, or by its class's name when no response came at all. The SDKs have
already retried what they retry (429 and 5xx, honouring `retry-after`) by the time one reaches
us.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ModelErrorKind = Literal[
    "rate_limited", "model_unavailable", "model_misconfigured", "model_rejected"
]

USER_TEXT: dict[ModelErrorKind, str] = {
    "rate_limited": "The AI model is busy right now. Please try again in a minute.",
    "model_unavailable": "The AI model could not be reached. Please try again.",
    "model_misconfigured": (
        "The assistant cannot use its AI model because of a setup problem. Please tell the"
        " site's operator."
    ),
    "model_rejected": (
        "The AI model could not take this conversation. Please rephrase, or start a new chat."
    ),
}
# Raised when no response, or only part of one, came back: by the SDKs (openai's, anthropic's)
# or by the HTTP client under them (anthropic lets a dropped stream's error through).
NO_RESPONSE = frozenset(
    {"APIConnectionError", "APITimeoutError", "ConnectError", "ReadTimeout", "RemoteProtocolError"}
)


@dataclass(frozen=True)
class ModelFailure:
    kind: ModelErrorKind
    status: int | None
    request_id: str | None
    retry_after_s: float | None

    @property
    def retriable(self) -> bool:
        """Worth another try later: the provider was busy or unreachable, not wrong."""
        return self.kind in ("rate_limited", "model_unavailable")

    @property
    def user_text(self) -> str:
        return USER_TEXT[self.kind]

    def log(self) -> dict[str, Any]:
        """What the operator's log line says: the class, the status, the provider's request id."""
        return {"error": self.kind, "status": self.status, "provider_request_id": self.request_id}


def classify(exc: BaseException) -> ModelFailure | None:
    """The failure `exc` is, or None when it is no provider's error (a bug of ours)."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        # No status: no response, or an error event inside a stream (openai's bare APIError).
        names = {cls.__name__ for cls in type(exc).__mro__}
        if names & NO_RESPONSE or "APIError" in names:
            return ModelFailure("model_unavailable", None, None, None)
        return None
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    request_id = getattr(exc, "request_id", None) or headers.get("request-id")
    return ModelFailure(_kind(status), status, request_id, _seconds(headers.get("retry-after")))


def _kind(status: int) -> ModelErrorKind:
    if status == 429:
        return "rate_limited"
    if status in (401, 403, 404):  # a bad key, no access, a model name that does not exist
        return "model_misconfigured"
    # 529: Anthropic's "overloaded"; under 400: an error event inside a stream that began well.
    if status == 408 or status >= 500 or status < 400:
        return "model_unavailable"
    return "model_rejected"


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: the SDK's own retries have honoured it already
