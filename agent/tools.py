"""What a tool can declare to the background job, and the errors and argument types any tool
may use.

A tool whose metadata has `requires_approval` runs only after the user approves the call; one
whose metadata has `asks_user` is never run: the background job puts the question to the user
and the answer is the call's result.
"""

from __future__ import annotations

from typing import Annotated

from langchain_core.tools import BaseTool
from pydantic import AfterValidator, WithJsonSchema, validate_email


class ToolInputError(ValueError):
    """The model called a tool with arguments it cannot accept: no retry can fix them."""


def requires_approval(tool: BaseTool) -> bool:
    return bool((tool.metadata or {}).get("requires_approval"))


def asks_user(tool: BaseTool) -> bool:
    return bool((tool.metadata or {}).get("asks_user"))


def email_address(value: str) -> str:
    """`value` if it is one e-mail address and nothing else, normalized (the domain lowercase).

    Checked by email-validator (through pydantic, which imports it on first use), without DNS:
    the syntax, and no control, bidi or invisible characters. A display name ("Ada <ada@…>")
    or surrounding spaces, which pydantic would strip, are refused: the address a person
    approves is the one used.
    """
    if value != value.strip() or "<" in value or ">" in value:
        raise ValueError("must be a bare e-mail address, without a name or spaces")
    return validate_email(value)[1]


# A tool argument that is an e-mail address: invalid, the call is the model's to fix (an error
# result), and never put to the user for approval.
EmailAddress = Annotated[
    str, AfterValidator(email_address), WithJsonSchema({"type": "string", "format": "email"})
]
