"""Provider errors by class, read from the exceptions the real SDKs raise."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2  # the HTTP client the provider SDKs are built on
import openai
import pytest

from agent.errors import classify

REQUEST = httpx2.Request("POST", "https://api.example/v1/chat/completions")


def raised(cls: Any, status: int, **headers: str) -> Exception:
    """The SDK's exception for an HTTP answer with `status` and `headers`."""
    error: Exception = cls("the provider's text", response=httpx2.Response(
        status, headers=headers, request=REQUEST), body=None)  # fmt: skip
    return error


@pytest.mark.parametrize(
    ("exc", "kind", "retriable"),
    [
        (raised(openai.RateLimitError, 429), "rate_limited", True),
        (raised(openai.AuthenticationError, 401), "model_misconfigured", False),
        (raised(openai.NotFoundError, 404), "model_misconfigured", False),
        (raised(openai.BadRequestError, 400), "model_rejected", False),
        (raised(openai.InternalServerError, 500), "model_unavailable", True),
        (openai.APIConnectionError(request=REQUEST), "model_unavailable", True),
        (raised(anthropic.InternalServerError, 529), "model_unavailable", True),
        (raised(anthropic.PermissionDeniedError, 403), "model_misconfigured", False),
    ],
)
def test_each_sdk_error_has_its_class(exc: Exception, kind: str, retriable: bool) -> None:
    failure = classify(exc)
    assert failure is not None
    assert (failure.kind, failure.retriable) == (kind, retriable)


def test_the_operator_gets_the_request_id_and_the_retry_after() -> None:
    exc = raised(openai.RateLimitError, 429, **{"retry-after": "7", "x-request-id": "req_123"})
    failure = classify(exc)
    assert failure is not None
    assert failure.retry_after_s == 7.0
    assert failure.log() == {
        "error": "rate_limited",
        "status": 429,
        "provider_request_id": "req_123",
    }


def test_our_own_bugs_are_no_providers_error() -> None:
    assert classify(KeyError("chat_id")) is None
