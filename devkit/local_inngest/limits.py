"""Inngest's per-run limits, and what the executor does when a run passes one.

The figures are Inngest's documented usage limits (https://www.inngest.com/docs/usage-limits/inngest:
"The limit for data returned by a step is 4MB", "Function run state cannot exceed 32MB", "The
maximum number of steps allowed per function is 1000"); the reactions are those of its executor
(github.com/inngest/inngest, pkg/consts/consts.go, pkg/execution/state/opcode.go,
pkg/execution/executor/{executor,validate}.go):

* A step output over ``MaxStepOutputSize`` (4 MiB) fails validation of the SDK's response: the
  attempt is an error like any other (``error validating generator opcode <id>: step output
  size is greater than the limit``), retried while attempts are left; then the run fails.
* A step output that would take the run's state (its events plus every stored step output)
  past ``DefaultMaxStateSizeLimit`` (32 MiB) fails the run at once, without a retry:
  ``InngestErrStateOverflowed``.
* A run that has stored ``DefaultMaxStepLimit`` (1,000) steps gets no further request, and a
  response that plans more than that many at once is refused: the run fails at once with
  ``InngestErrFunctionOverflowed``. A function of exactly 1,000 steps therefore never returns.

Sizes are counted as Inngest stores them: a step's ``{"data": …}`` (``{"error": …}``) in compact
JSON, non-ASCII escaped as the SDK sends it, and ``<``, ``>`` and ``&`` escaped again (Go's
encoder re-encodes the raw JSON it stores with HTML escaping).
"""

from __future__ import annotations

import dataclasses
import json

from devkit.local_inngest.runs import JSONDict, error

STEP_OUTPUT_BYTES = 4 * 1024 * 1024
STATE_BYTES = 32 * 1024 * 1024
STEPS = 1000

STEP_OUTPUT_TOO_LARGE = "step output size is greater than the limit"
STATE_OVERFLOWED = "InngestErrStateOverflowed"
FUNCTION_OVERFLOWED = "InngestErrFunctionOverflowed"


@dataclasses.dataclass(frozen=True)
class Limits:
    """The limits a run is held to; Inngest's own by default (smaller ones keep tests quick)."""

    step_output_bytes: int = STEP_OUTPUT_BYTES
    state_bytes: int = STATE_BYTES
    steps: int = STEPS


class LimitExceeded(Exception):
    """The run passed a limit that ends it at once; ``error`` is what the run failed with."""

    def __init__(self, err: JSONDict) -> None:
        super().__init__(err["message"])
        self.error = err


def stored_bytes(value: object) -> int:
    """The bytes `value` takes in a run's state, as Inngest counts them."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    # `<`, `>` and `&` can only occur inside strings; each becomes a six-byte \u escape.
    return len(text) + 5 * (text.count("<") + text.count(">") + text.count("&"))


def step_output_error(op_id: str) -> JSONDict:
    return error("Error", f"error validating generator opcode {op_id}: {STEP_OUTPUT_TOO_LARGE}")


def state_overflowed(limits: Limits) -> LimitExceeded:
    message = f"The function run exceeded the state size limit of {limits.state_bytes} bytes."
    return LimitExceeded(error(STATE_OVERFLOWED, message))


def function_overflowed(limits: Limits) -> LimitExceeded:
    message = f"The function run exceeded the step limit of {limits.steps} steps."
    return LimitExceeded(error(FUNCTION_OVERFLOWED, message))
