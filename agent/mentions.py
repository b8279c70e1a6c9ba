"""@-mentions: which assistants a message names, in the order it names them.

An assistant is mentioned by `@` and its id or its display name, in any case (`@helper`,
`@Research Bot`). Not a mention: an `@` inside a code span or block, a URL or an e-mail address
(`ada@helper.dev`), or one that names no assistant, which stays plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Fenced blocks first, so their backticks are not read as inline spans.
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\bwww\.\S+", re.IGNORECASE)
# What may stand just before a mention's `@`: an address's local part may not.
_BEFORE = re.compile(r"[\w.%+-]")
# What may not follow a name: it would make a longer word.
_AFTER = re.compile(r"[\w-]")


def mentioned(content: str, assistants: Iterable[tuple[str, str]]) -> list[str]:
    """The ids of the assistants (`(id, display name)` pairs) that `content` mentions, each once,
    in the order of their first mention."""
    names = [(key, a_id) for a_id, name in assistants for key in (a_id, name) if key.strip()]
    names.sort(key=lambda pair: len(pair[0]), reverse=True)  # "Research Bot" before "Research"
    text = _masked(content)
    found: dict[str, None] = {}
    for at in (i for i, char in enumerate(text) if char == "@"):
        if at > 0 and _BEFORE.match(text[at - 1]):
            continue
        for key, assistant_id in names:
            end = at + 1 + len(key)
            said = text[at + 1 : end]
            if said.casefold() == key.casefold() and not _AFTER.match(text[end : end + 1]):
                found.setdefault(assistant_id)
                break
    return list(found)


def _masked(content: str) -> str:
    """`content` with its code and URLs blanked out, every other character where it was."""
    for pattern in (_CODE, _URL):
        content = pattern.sub(lambda m: " " * len(m.group()), content)
    return content
