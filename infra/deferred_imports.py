"""Package bodies a cold start skips until something asks them for a name.

Some dependencies import far more than the code we run needs, in their packages' `__init__`:
LangGraph imports `langgraph_sdk.auth.types` for one class, and `langgraph_sdk/__init__` then
loads the whole SDK client (httpx, websockets, its streaming transports); LangSmith imports
`langsmith.types.run_select_field`, and `langsmith/types/__init__` loads every one of its
hundreds of generated API types. The submodules themselves are small.

`defer_package_bodies` makes such a package's `__init__` run on first use instead: the package
module exists at once, with its `__path__`, so its submodules import as always; the first
attribute it lacks (`langgraph_sdk.get_client`, `from langsmith.types import Run`) runs the
real `__init__` in it and is answered from there. Nothing changes for a caller but when the
code runs. The Lambda entries install it before importing anything else.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

# Each a package whose `__init__` imports what the quick path and the background job never use,
# and whose submodules they do import (tests/handlers/test_lambda_entries.py).
HEAVY_PACKAGE_BODIES = ("langgraph_sdk", "langsmith.types", "email_validator")


class _DeferredBody(importlib.abc.Loader):
    """Creates the package as its own loader would, and runs its body on first use."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        lock = threading.Lock()
        loader = self.loader

        def run_body_then_get(name: str) -> Any:
            with lock:
                if module.__dict__.get("__getattr__") is run_body_then_get:
                    del module.__dict__["__getattr__"]
                    loader.exec_module(module)
            return getattr(module, name)

        module.__dict__["__getattr__"] = run_body_then_get


class _DeferringFinder(importlib.abc.MetaPathFinder):
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return spec  # not an installed package: imported as it would be
        spec.loader = _DeferredBody(spec.loader)
        return spec


def defer_package_bodies(names: Sequence[str] = HEAVY_PACKAGE_BODIES) -> None:
    """From now on, each package of `names` not imported yet runs its `__init__` on first use."""
    if not any(isinstance(finder, _DeferringFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _DeferringFinder(frozenset(names)))
