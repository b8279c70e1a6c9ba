"""The dev page's protocol client (devkit/dev_page/protocol/) speaks to the server and knows
nothing of the page: it imports only its own modules and touches no DOM, so that it can be read,
and run, without the page (in a worker, or under node)."""

from __future__ import annotations

import re

import pytest

from devkit.dev_routes import PAGE_DIR

PROTOCOL_DIR = PAGE_DIR / "protocol"
IMPORTED = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]""")
# What exists only in a page: the document and its window, and what hangs from them.
PAGE_ONLY = re.compile(
    r"\b(document|window|CSS|HTML\w*Element|localStorage|sessionStorage|location\.|"
    r"history\.\w+State|querySelector\w*|getElementById|dataset)\b"
)
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def protocol_modules() -> list[str]:
    return sorted(path.name for path in PROTOCOL_DIR.glob("*.js"))


def test_the_protocol_client_is_a_package_of_its_own() -> None:
    assert {"client.js", "feed.js", "sse.js"} <= set(protocol_modules())


@pytest.mark.parametrize("name", protocol_modules())
def test_a_protocol_module_imports_only_the_protocol(name: str) -> None:
    code = COMMENT.sub("", (PROTOCOL_DIR / name).read_text())
    imported = IMPORTED.findall(code)
    assert [path for path in imported if not re.fullmatch(r"\./[\w-]+\.js", path)] == []


@pytest.mark.parametrize("name", protocol_modules())
def test_a_protocol_module_touches_no_page(name: str) -> None:
    code = COMMENT.sub("", (PROTOCOL_DIR / name).read_text())
    assert PAGE_ONLY.findall(code) == []
