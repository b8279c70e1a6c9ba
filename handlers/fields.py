"""What a request may carry as text.

Postgres cannot store U+0000 in `text` or `jsonb`: a NUL character that reaches a statement
fails it, or the lookup it was a parameter of, with an error nothing expects (a 500 and a
traceback). `NO_NUL` refuses it before the handler runs, as a 422 that names the field. Every
string a request carries goes through it: each string field of a request model, each string
path and query parameter. tests/security/test_request_text.py sends a NUL to every one of them
that the OpenAPI schema lists, so a new field without it fails there.

Constraints go before it, `Annotated[str, Field(max_length=200), NO_NUL]`: placed after it,
pydantic applies them to the validator's output, and both their messages ("at most 200 items")
and their OpenAPI schema go wrong.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from agent.threads import ASSISTANT_ID_PATTERN

NUL_REFUSED = "must not contain NUL characters"


def _storable(value: object) -> object:
    # Before the field's own checks, so that a pattern or a length does not answer first with
    # a reason that does not say what is wrong.
    if isinstance(value, str) and "\x00" in value:
        raise PydanticCustomError("nul_character", NUL_REFUSED)
    return value


NO_NUL = BeforeValidator(_storable)

# The assistant a chat's thread belongs to, in a request body and in a query; none names the
# deployment's default assistant (handlers/deps.py `requested_assistant`).
AssistantId = Annotated[str | None, Field(pattern=ASSISTANT_ID_PATTERN.pattern), NO_NUL]
# One that must be given (a chat's assistants).
AssistantIdField = Annotated[str, Field(pattern=ASSISTANT_ID_PATTERN.pattern), NO_NUL]
AssistantQuery = Annotated[
    str | None, Query(alias="assistantId", pattern=ASSISTANT_ID_PATTERN.pattern), NO_NUL
]
# A tool call's or a question's id, as the model's provider made it, in a path.
CallIdPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,128}$"), NO_NUL]
