"""How a background step says its job should end, or be tried again later."""

from __future__ import annotations


class JobFailed(RuntimeError):
    """The job cannot succeed, however often it is retried."""


class RetryLater(RuntimeError):
    """The provider was busy or unreachable: try the step again after `after_s` (None: the
    function's own backoff)."""

    def __init__(self, message: str, after_s: float | None) -> None:
        super().__init__(message)
        self.after_s = after_s
