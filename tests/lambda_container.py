"""One Lambda execution environment, as the Python runtime gives it to an entry module.

The module is imported once (the init phase), then each invocation calls its handler on the
same thread, one at a time, with that thread's event loop, which is what Mangum runs on.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

EVENTS = Path(__file__).parent / "events"


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


@dataclass(frozen=True)
class LambdaContext:
    """The attributes of the runtime's context object that a handler may read."""

    function_name: str = "handoff-prod-inngest"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    aws_request_id: str = "8f4e2b1c-0d3a-4e5f-9a6b-7c8d9e0f1a2b"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


class LambdaContainer:
    def __init__(self, entry_module: str) -> None:
        self.entry_module = entry_module
        self._thread = ThreadPoolExecutor(1, initializer=_own_event_loop)
        self.module: ModuleType | None = None

    async def __aenter__(self) -> LambdaContainer:
        self.module = await self._on_thread(self._import)
        return self

    async def __aexit__(self, *exc: object) -> None:
        # The runtime would freeze the container; a test closes the pool the module opened.
        assert self.module is not None
        app = self.module.handler.app
        await self._on_thread(_run_on_own_loop, app.state.services.close())
        self._thread.shutdown()

    async def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        assert self.module is not None
        response: dict[str, Any] = await self._on_thread(
            self.module.handler, event, LambdaContext()
        )
        return response

    def _import(self) -> ModuleType:
        # A fresh import, as in a new container: module-level code reads the settings now.
        sys.modules.pop(self.entry_module, None)
        return importlib.import_module(self.entry_module)

    async def _on_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)


def _own_event_loop() -> None:
    asyncio.set_event_loop(asyncio.new_event_loop())


def _run_on_own_loop(coro: Any) -> Any:
    return asyncio.get_event_loop().run_until_complete(coro)
