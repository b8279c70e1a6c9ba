"""The small subset of Inngest's CEL expressions the executor evaluates."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

EventFilter = Callable[[Mapping[str, Any]], bool]

PATH_EXPR = re.compile(r"^event(\.[A-Za-z_]\w*)+$")
_EQ_EXPR = re.compile(r"""^\s*(event(?:\.[A-Za-z_]\w*)+)\s*==\s*(?:'([^']*)'|"([^"]*)")\s*$""")


def lookup(event: Mapping[str, Any], path: str) -> Any:
    node: Any = {"event": event}
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def compile_filter(expr: str | None) -> EventFilter | None:
    if expr is None:
        return None
    m = _EQ_EXPR.match(expr)
    if m is None:
        raise ValueError(f"LocalInngest only supports `event.<path> == '<str>'`, got {expr!r}")
    path, literal = m.group(1), m.group(2) if m.group(2) is not None else m.group(3)
    return lambda event: lookup(event, path) == literal
