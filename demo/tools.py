"""The demo's tools: arithmetic, a wait, a large report, an email that needs the user's
approval, and a question to the user. Invalid input raises ToolInputError (agent/tools.py),
which no retry can fix; `send_email` declares `requires_approval`, `ask_user` `asks_user`.
"""

from __future__ import annotations

import ast
import asyncio
import math
import operator
from collections.abc import Callable
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from pydantic import Field

from agent.tools import EmailAddress, ToolInputError
from demo.mail import MAILER

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 100
# About 1,200 digits: far below str()'s 4,300-digit limit, and cheap to compute. Checked before
# a power is computed, since nested powers are tiny to write and huge to evaluate.
MAX_RESULT_BITS = 4000


def evaluate(expression: str) -> int | float:
    """Arithmetic on numbers with + - * / // % ** and parentheses; nothing else parses."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolInputError("expression is too long")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolInputError(f"not an arithmetic expression: {expression!r}") from exc
    try:
        return _eval(tree.body)
    except (ZeroDivisionError, OverflowError) as exc:
        raise ToolInputError(str(exc)) from exc


def _eval(node: ast.expr) -> int | float:
    # bool is an int subclass; True + True is not arithmetic anyone asked for.
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ToolInputError("only numbers and + - * / // % ** ( ) are allowed")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise ToolInputError("exponent is too large")
            if _bits(left) * abs(right) > MAX_RESULT_BITS:
                raise ToolInputError("result is too large")
        return _checked(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand)))
    raise ToolInputError("only numbers and + - * / // % ** ( ) are allowed")


def _bits(value: int | float) -> int:
    if isinstance(value, float):
        return max(1, math.frexp(value)[1])
    return max(1, abs(value).bit_length())


def _checked(value: complex | int | float) -> int | float:
    if isinstance(value, complex):
        raise ToolInputError("result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolInputError("result is too large")
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise ToolInputError("result is too large")
    return value


@tool
def calc(input: str) -> str:
    """Evaluate an arithmetic expression, e.g. "2*21"."""
    result = evaluate(input)
    if isinstance(result, float) and result.is_integer():
        return str(int(result))
    return str(result)


MAX_SLEEP_SECONDS = 600.0


@tool
async def sleep(input: str) -> str:
    """Wait for the given number of seconds (simulates slow I/O)."""
    try:
        seconds = float(input)
    except ValueError as exc:
        raise ToolInputError(f"not a number of seconds: {input!r}") from exc
    if not 0 <= seconds <= MAX_SLEEP_SECONDS:
        raise ToolInputError(f"seconds must be between 0 and {MAX_SLEEP_SECONDS:g}")
    await asyncio.sleep(seconds)
    return f"slept {seconds:g}s"


MAX_REPORT_KB = 4096
_REPORT_LINE = "Report line {n:05d}: the quick brown fox jumps over the lazy dog.\n"


@tool
def report(input: str) -> str:
    """Produce a report of about N kilobytes of text (for large outputs)."""
    try:
        kb = float(input)
    except ValueError as exc:
        raise ToolInputError(f"not a size in KB: {input!r}") from exc
    if not 0 < kb <= MAX_REPORT_KB:
        raise ToolInputError(f"size must be between 0 and {MAX_REPORT_KB} KB")
    target = int(kb * 1024)
    lines: list[str] = []
    size = 0
    while size < target:
        line = _REPORT_LINE.format(n=len(lines) + 1)
        lines.append(line)
        size += len(line)
    return "".join(lines)[:target]


@tool
async def send_email(
    to: EmailAddress,
    subject: str,
    tool_call_id: Annotated[str, InjectedToolCallId],
    body: str = "",
) -> str:
    """Send an email (simulated: nothing leaves the process). Runs once the user approves."""
    # A call may run twice (its process died before its result was stored): the call's id,
    # the same on every run, is the send's idempotency key, so the email goes out once.
    MAILER.send(idempotency_key=tool_call_id, to=to, subject=subject, body=body)
    return f"Email to {to} sent (simulated), subject {subject!r}, {len(body)} characters."


send_email.metadata = {"requires_approval": True}


MAX_QUESTION_CHARS = 2000
MAX_OPTION_CHARS = 200


@tool
def ask_user(
    question: Annotated[str, Field(min_length=1, max_length=MAX_QUESTION_CHARS)],
    options: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_OPTION_CHARS)]],
        Field(min_length=2, max_length=3),
    ],
    context: Annotated[str, Field(max_length=MAX_QUESTION_CHARS)] = "",
) -> str:
    """Ask the user a question and wait for their answer, which is this call's result. Give
    2 or 3 suggested answers in `options` (the user may also answer in their own words) and,
    in `context`, why you ask. Use it when you cannot go on well without their answer."""
    # Never reached through the background job, which asks the user instead of running this.
    raise ToolInputError("ask_user is answered by the user, not run")


ask_user.metadata = {"asks_user": True}


def demo_tools() -> list[BaseTool]:
    """The five tools, which the demo's helper has all of."""
    return [calc, sleep, report, send_email, ask_user]
