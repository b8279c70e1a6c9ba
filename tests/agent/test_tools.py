"""The demo tools and the thread-key policy."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ValidationError

from agent.threads import thread_config, thread_key
from agent.tools import ToolInputError, asks_user, requires_approval
from demo.mail import MAILER
from demo.tools import (
    MAX_EXPRESSION_CHARS,
    MAX_REPORT_KB,
    MAX_SLEEP_SECONDS,
    ask_user,
    calc,
    demo_tools,
    evaluate,
    report,
    send_email,
    sleep,
)


def email_call(args: dict[str, Any]) -> ToolCall:
    """A model's call of send_email, as the background job invokes a tool."""
    return {
        "name": "send_email",
        "args": args,
        "id": f"call_{uuid.uuid4().hex}",
        "type": "tool_call",
    }


def run_calc(expression: str) -> str:
    result = calc.invoke({"input": expression})
    assert isinstance(result, str)
    return result


# --- calc ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2*21", "42"),
        ("40 + 2", "42"),
        ("50 - 8", "42"),
        ("7 / 2", "3.5"),
        ("84 / 2", "42"),
        ("85 // 2", "42"),
        ("-7 // 2", "-4"),
        ("142 % 100", "42"),
        ("2 ** 10", "1024"),
        ("2 ** -1", "0.5"),
        ("(1 + 2) * (3 + 4) * 2", "42"),
        ("2 * (3 + (4 - 1))", "12"),
        ("-(-42)", "42"),
        ("+42", "42"),
        ("0.1 * 3", str(0.1 * 3)),
        ("1.5e2 / 3", "50"),
        ("  6 * 7  ", "42"),
    ],
)
def test_calc_evaluates_arithmetic(expression: str, expected: str) -> None:
    assert run_calc(expression) == expected


def test_calc_accepts_the_largest_allowed_exponent() -> None:
    assert run_calc("2 ** 100") == str(2**100)


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param("x", id="name"),
        pytest.param("x + 1", id="name-in-expression"),
        pytest.param("abs(-1)", id="call"),
        pytest.param("(1).real", id="attribute"),
        pytest.param("(1).__class__", id="dunder-attribute"),
        pytest.param("__import__('os').system('true')", id="import"),
        pytest.param("'a' * 3", id="string"),
        pytest.param("True + 1", id="bool"),
        pytest.param("[1, 2][0]", id="subscript"),
        pytest.param("1 if 1 else 2", id="conditional"),
        pytest.param("lambda: 1", id="lambda"),
        pytest.param("1 < 2", id="comparison"),
        pytest.param("1 << 2", id="shift"),
        pytest.param("1j * 1j", id="complex"),
        pytest.param("", id="empty"),
        pytest.param("1 +", id="syntax-error"),
        pytest.param("1; 2", id="statements"),
        pytest.param("2 ** 101", id="huge-exponent"),
        pytest.param("2 ** -101", id="huge-negative-exponent"),
        pytest.param("2 ** (50 + 51)", id="computed-huge-exponent"),
        pytest.param("1 / 0", id="division-by-zero"),
        pytest.param("1 // 0", id="floor-division-by-zero"),
        pytest.param("1 % 0", id="modulo-by-zero"),
        pytest.param("(10.0 ** 100) ** 100", id="float-overflow"),
    ],
)
def test_calc_rejects_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(ToolInputError):
        run_calc(expression)


def test_calc_rejects_over_long_input() -> None:
    # GIVEN an expression just over the limit, valid except for its length
    fits = "1" + "+1" * ((MAX_EXPRESSION_CHARS - 1) // 2)
    too_long = fits + "+1"
    assert len(fits) <= MAX_EXPRESSION_CHARS < len(too_long)

    # THEN only the one within the limit is evaluated
    assert run_calc(fits) == str(fits.count("1"))
    with pytest.raises(ToolInputError, match="too long"):
        run_calc(too_long)


def test_tool_input_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="division by zero"):
        evaluate("1/0")


@pytest.mark.parametrize("expression", ["(10 ** 100) ** 100", "((2 ** 100) ** 100) ** 100"])
def test_calc_rejects_results_too_large_to_show(expression: str) -> None:
    with pytest.raises(ToolInputError):
        run_calc(expression)


def test_calc_refuses_nested_powers_before_computing_them() -> None:
    # Four levels: 2**100_000_000, about 12 MB and under a second today; one more level
    # would be 100 times larger, so the test stays at four.
    started = time.perf_counter()
    with pytest.raises(ToolInputError):
        evaluate("(((2 ** 100) ** 100) ** 100) ** 100")
    assert time.perf_counter() - started < 0.1


# --- report ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "expected_chars"), [("1", 1024), ("3", 3072), ("0.5", 512)])
def test_report_returns_about_n_kilobytes(size: str, expected_chars: int) -> None:
    text = report.invoke({"input": size})
    assert isinstance(text, str)
    assert len(text.encode()) == expected_chars
    assert text.startswith("Report line 00001:")


def test_report_is_deterministic() -> None:
    assert report.invoke({"input": "2"}) == report.invoke({"input": "2"})


@pytest.mark.parametrize("size", ["0", "-1", str(MAX_REPORT_KB + 1), "lots", "nan", "inf"])
def test_report_rejects_sizes_out_of_range(size: str) -> None:
    with pytest.raises(ToolInputError):
        report.invoke({"input": size})


# --- sleep -----------------------------------------------------------------------------------


async def test_sleep_of_zero_returns_at_once() -> None:
    started = time.perf_counter()
    assert await sleep.ainvoke({"input": "0"}) == "slept 0s"
    assert time.perf_counter() - started < 1.0


async def test_sleep_waits_the_given_seconds() -> None:
    started = time.perf_counter()
    assert await sleep.ainvoke({"input": "0.05"}) == "slept 0.05s"
    assert time.perf_counter() - started >= 0.04


@pytest.mark.parametrize(
    "seconds", ["-1", "-0.001", str(MAX_SLEEP_SECONDS + 1), "forever", "nan", "inf"]
)
async def test_sleep_rejects_seconds_out_of_range(seconds: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ToolInputError):
        await sleep.ainvoke({"input": seconds})
    assert time.perf_counter() - started < 1.0


def test_demo_tools_are_the_five_named_tools() -> None:
    names = [t.name for t in demo_tools()]
    assert names == ["calc", "sleep", "report", "send_email", "ask_user"]


def test_only_ask_user_asks_the_user_and_it_never_runs() -> None:
    assert [t.name for t in demo_tools() if asks_user(t)] == ["ask_user"]
    with pytest.raises(ToolInputError):
        ask_user.invoke({"question": "Which?", "options": ["a", "b"]})


def test_only_send_email_needs_approval() -> None:
    assert [t.name for t in demo_tools() if requires_approval(t)] == ["send_email"]


@pytest.mark.parametrize(
    "address",
    [
        "ada",
        "ada@",
        "@example.com",
        "ada@localhost",
        "ada@example..com",
        "ada@@example.com",
        "ada@example.com, eve@example.com",
        "Ada <ada@example.com>",
        " ada@example.com",
        "ada@example.com\n",
        "ada@exam\u202eple.com",
        "ada\u200b@example.com",
        "ada@example.com\u2066",
        "ada\x00@example.com",
    ],
)
async def test_send_email_refuses_an_address_that_is_not_one(address: str) -> None:
    with pytest.raises(ValidationError, match="to"):
        await send_email.ainvoke(email_call({"to": address, "subject": "Hi"}))


async def test_send_email_takes_an_address_in_its_normal_form() -> None:
    sent = await send_email.ainvoke(
        email_call({"to": "Ada.Lovelace+notes@Example.COM", "subject": "Hi"})
    )
    assert isinstance(sent, ToolMessage)
    assert str(sent.content).startswith("Email to Ada.Lovelace+notes@example.com sent")


async def test_send_email_sends_once_per_call_however_often_the_call_runs() -> None:
    # GIVEN one call, run twice (as after a crash before its result was stored), and another
    to = f"ada+{uuid.uuid4().hex}@example.com"
    call = email_call({"to": to, "subject": "Minutes"})
    other = email_call({"to": to, "subject": "Minutes"})
    first = await send_email.ainvoke(call)
    again = await send_email.ainvoke(call)
    await send_email.ainvoke(other)
    # THEN the call's email went out once, keyed by its id, and the other call's too
    assert again.content == first.content
    assert len(MAILER.sent_to(to)) == 2
    assert MAILER.requests(str(call["id"])) == 2


def test_send_email_cannot_run_without_its_call_id() -> None:
    # The key must come with the call: a bare invocation has none to give.
    with pytest.raises(ValueError, match="ToolCall"):
        send_email.invoke({"to": "ada@example.com", "subject": "Hi"})


def test_the_model_is_told_the_recipient_is_an_email_address() -> None:
    schema = convert_to_openai_tool(send_email)["function"]["parameters"]
    assert schema["properties"]["to"] == {"type": "string", "format": "email"}


# --- thread keys -----------------------------------------------------------------------------


def test_thread_key_is_chat_then_assistant() -> None:
    chat_id = uuid.uuid4()
    assert thread_key(chat_id, "planner") == f"{chat_id}:planner"


def test_each_assistant_in_a_chat_gets_its_own_thread() -> None:
    chat_id = uuid.uuid4()
    assert thread_key(chat_id, "a") != thread_key(chat_id, "b")
    assert thread_key(chat_id, "a") != thread_key(uuid.uuid4(), "a")


@pytest.mark.parametrize("assistant_id", ["", "a:b", ":", "has space", "x" * 65, "é"])
def test_thread_key_rejects_bad_assistant_ids(assistant_id: str) -> None:
    with pytest.raises(ValueError, match="assistant id"):
        thread_key(uuid.uuid4(), assistant_id)


def test_thread_key_splits_back_into_chat_and_assistant() -> None:
    chat_id = uuid.uuid4()
    chat, assistant = thread_key(chat_id, "support-bot_2").split(":")
    assert (uuid.UUID(chat), assistant) == (chat_id, "support-bot_2")


def test_thread_config_keeps_the_root_namespace_empty() -> None:
    key = thread_key(uuid.uuid4(), "default")
    config = thread_config(key, checkpoint_id="abc")
    assert config["configurable"] == {"thread_id": key, "checkpoint_ns": "", "checkpoint_id": "abc"}
