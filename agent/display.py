"""What a person is shown before deciding on a tool call: every character there to see.

A tool call's arguments come from the model, which may have copied them from anything it read.
Shown as they are, control characters, bidi controls (U+202A to U+202E, U+2066 to U+2069,
U+200E and U+200F, U+061C) and invisible characters (U+200B to U+200D, U+2060, U+FEFF, tag
characters, variation selectors…) can hide text or reorder it, so that a person approves
something other than what they read: `invoice\\u202efdp.exe` shows as `invoiceexe.pdf`.
`display_arguments` writes the arguments as indented JSON with each such character as a
`\\uXXXX` escape, which is still JSON that parses back to the same arguments.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

# Control, format (bidi controls, zero-width characters, soft hyphen, tags), line and paragraph
# separators, surrogates, private use and unassigned code points.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
# Invisible characters of other categories: the combining grapheme joiner, Hangul fillers,
# Mongolian variation selectors, the blank braille pattern and the variation selectors.
HIDDEN_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x180B, 0x180F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)


def hidden(char: str) -> bool:
    """Whether `char` can hide or reorder what is around it instead of showing as itself."""
    code = ord(char)
    return unicodedata.category(char) in HIDDEN_CATEGORIES or any(
        low <= code <= high for low, high in HIDDEN_RANGES
    )


def escaped(char: str) -> str:
    """`char` as a JSON escape: `\\u202e`; beyond the BMP, its surrogate pair."""
    code = ord(char)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def visible(text: str, *, keep: str = "") -> str:
    """`text` with every hidden character escaped, but those in `keep`."""
    return "".join(escaped(c) if hidden(c) and c not in keep else c for c in text)


def display_arguments(args: Any) -> str:
    """A tool call's arguments as a person should read them: indented JSON, other scripts as
    they are, every hidden character escaped. `json.loads` gives the arguments back."""
    # A line break outside a string is the indentation's: JSON escapes those within. Every
    # other hidden character can only stand inside a string, where its escape means the same.
    return visible(json.dumps(args, indent=2, ensure_ascii=False), keep="\n")
