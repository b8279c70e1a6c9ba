"""One signed request to the app's serve endpoint, and how its answer is classified."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any, Literal

import httpx

from devkit.local_inngest.runs import AbortRunError, Run, error
from devkit.local_inngest.signing import canonical_json, sign_body, signed_by_sdk
from devkit.local_inngest.targets import ROOT_STEP


@dataclasses.dataclass(frozen=True)
class Reply:
    kind: Literal["ops", "done", "error", "transport"]
    body: Any = None
    no_retry: bool = False

    @property
    def retriable(self) -> bool:
        if self.kind == "transport":
            return True
        if self.no_retry or self.kind == "done":
            return False
        return self.kind == "error" or any(op.get("op") == "StepError" for op in self.body)


def transport_error(message: str) -> Reply:
    return Reply("transport", error("LocalInngestTransportError", message))


class Endpoint:
    """The app's ``/api/inngest``, called the way Inngest's executor calls it.

    ``delay_s`` goes before every request: the time Inngest Cloud takes to reach a Lambda."""

    def __init__(
        self, serve_url: str, signing_key: str, timeout: float, delay_s: float = 0.0
    ) -> None:
        self.serve_url = serve_url
        self.delay_s = delay_s
        self._signing_key = signing_key
        self._timeout = timeout
        self._http: httpx.AsyncClient | None = None

    @property
    def is_open(self) -> bool:
        return self._http is not None

    def open(self) -> None:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self._timeout)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def call(
        self,
        run: Run,
        step_id: str | None,
        attempt: int,
        disable_immediate: bool,
        slot: contextlib.AbstractAsyncContextManager[None],
    ) -> Reply:
        """Post the run's memo stack, targeting ``step_id`` (None: discover the next steps).

        ``slot`` is held only while the request is in flight (concurrency limits)."""
        if self._http is None:
            raise RuntimeError("LocalInngest.start() has not been awaited")
        body = request_body(run, attempt, disable_immediate)
        headers = {
            "content-type": "application/json",
            "x-inngest-signature": sign_body(body, self._signing_key),
            "x-inngest-server-kind": "cloud",
        }
        params = {"fnId": run.target.fn_id, "stepId": step_id or ROOT_STEP}
        try:
            async with slot:
                # In flight from here, as far as concurrency limits are concerned.
                if self.delay_s > 0:
                    await asyncio.sleep(self.delay_s)
                    if run.status == "cancelled":
                        return transport_error("run cancelled before the call went out")
                res = await self._http.post(
                    self.serve_url, params=params, content=body, headers=headers
                )
            parsed = res.json() if res.content else None
        except (httpx.HTTPError, ValueError) as err:
            return transport_error(repr(err))
        if res.headers.get("x-inngest-expected-server-kind") == "dev":
            raise AbortRunError("serve endpoint's client has is_production=False: it cannot sign")
        # Anything the SDK did not sign (a proxy's 502, a crashed worker, a 401 from a
        # rejected signature) is a transport failure of this attempt, hence retriable.
        signature = res.headers.get("x-inngest-signature", "")
        if res.status_code not in (200, 206, 500) or not signed_by_sdk(
            res.content, signature, self._signing_key
        ):
            return transport_error(
                f"HTTP {res.status_code} without a valid SDK signature: {res.text[:300]}"
            )
        no_retry = res.headers.get("x-inngest-no-retry") == "true"
        if res.status_code == 206 and isinstance(parsed, list):
            return Reply("ops", [op for op in parsed if isinstance(op, dict)], no_retry)
        if res.status_code == 200:
            return Reply("done", parsed)
        return Reply("error", parsed, no_retry)


def request_body(run: Run, attempt: int, disable_immediate: bool) -> bytes:
    """The call's body as Inngest sends it: the run's event and memoized steps."""
    return canonical_json(
        {
            "ctx": {
                "run_id": run.run_id,
                "attempt": attempt,
                "max_attempts": run.target.max_attempts,
                "disable_immediate_execution": disable_immediate,
                "use_api": False,
                "stack": {"stack": list(run.steps)},
            },
            "event": run.event,
            "events": [run.event],
            "steps": run.steps,
            "use_api": False,
            "version": 1,
        }
    )
