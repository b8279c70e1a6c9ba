"""The small subset of Inngest's CEL expressions and duration strings the executor evaluates.

Expressions are equality clauses joined by ``&&``. Each side of ``==`` is a dotted path
rooted at ``event`` (the run's triggering event) or, in ``wait_for_event`` and ``cancel``
expressions, ``async`` (the event that arrives later), or a string literal in single or
double quotes (no escapes). A path whose value is missing or null never matches. Anything
else (``||``, ``!=``, ``<``, numbers, functions, parentheses) raises
``UnsupportedExpression`` rather than being guessed at.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

Event = Mapping[str, Any]
EventFilter = Callable[[Event], bool]

PATH_EXPR = re.compile(r"^event(\.[A-Za-z_]\w*)+$")
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<path>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)
        | '(?P<single>[^'\\]*)'
        | "(?P<double>[^"\\]*)"
        | (?P<op>==|&&)
    )\s*""",
    re.VERBOSE,
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


class UnsupportedExpression(ValueError):
    """An expression outside the subset the local executor evaluates."""


@dataclasses.dataclass(frozen=True)
class _Operand:
    root: str | None  # None: a string literal
    value: str  # the path below the root, or the literal

    def resolve(self, roots: Mapping[str, Event]) -> Any:
        if self.root is None:
            return self.value
        return lookup(roots[self.root], f"event.{self.value}")


@dataclasses.dataclass(frozen=True)
class Match:
    """A compiled expression: call it with the trigger event and the arriving one."""

    source: str
    clauses: tuple[tuple[_Operand, _Operand], ...]

    def __call__(self, event: Event, incoming: Event | None = None) -> bool:
        roots = {"event": event, "async": incoming or {}}
        for left, right in self.clauses:
            a, b = left.resolve(roots), right.resolve(roots)
            if a is None or b is None or a != b:
                return False
        return True


def lookup(event: Event, path: str) -> Any:
    """An ``event.data.chatId`` style path into ``event``; None where anything is missing."""
    node: Any = {"event": event}
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def compile_match(expr: str, roots: frozenset[str] = frozenset({"event", "async"})) -> Match:
    """Compile ``expr``; ``UnsupportedExpression`` if it is outside the subset."""
    tokens = _tokens(expr, roots)
    if not tokens or tokens[-1] == ("op", "&&"):
        raise _refuse(expr, roots)
    clauses: list[tuple[_Operand, _Operand]] = []
    # operand == operand, then either the end or && and the next clause.
    for i in range(0, len(tokens), 4):
        chunk = tokens[i : i + 4]
        if len(chunk) < 3 or chunk[1] != ("op", "==") or chunk[3:] not in ([], [("op", "&&")]):
            raise _refuse(expr, roots)
        left, right = _operand(chunk[0], roots, expr), _operand(chunk[2], roots, expr)
        if left.root is None and right.root is None:
            raise _refuse(expr, roots)
        clauses.append((left, right))
    return Match(expr, tuple(clauses))


def compile_filter(expr: str | None) -> EventFilter | None:
    """A trigger's ``expression``: only ``event`` is in scope."""
    if expr is None:
        return None
    match = compile_match(expr, frozenset({"event"}))
    return lambda event: match(event)


def parse_duration(text: str) -> float:
    """Seconds in an Inngest duration string such as ``30m``, ``1h30m``, ``1800s``, ``500ms``."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UnsupportedExpression(f"LocalInngest cannot read the duration {text!r}")
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _tokens(expr: str, roots: frozenset[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None or m.end() == pos:
            raise _refuse(expr, roots)
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _operand(token: tuple[str, str], roots: frozenset[str], expr: str) -> _Operand:
    kind, text = token
    if kind in ("single", "double"):
        return _Operand(None, text)
    if kind != "path":
        raise _refuse(expr, roots)
    root, _, rest = text.partition(".")
    if root not in roots:
        raise _refuse(expr, roots)
    return _Operand(root, rest)


def _refuse(expr: str, roots: frozenset[str]) -> UnsupportedExpression:
    paths = ", ".join(f"`{root}.<path>`" for root in sorted(roots, reverse=True))
    return UnsupportedExpression(
        f"LocalInngest only evaluates `==` between {paths} and quoted strings, joined by "
        f"`&&`; refusing {expr!r}"
    )
