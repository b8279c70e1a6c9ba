"""The dev page's protocol layer (devkit/dev_page/protocol/: the dev server's session) speaks to
the server and knows nothing of the page: it imports only its own modules and the JavaScript
client's build (devkit/dev_page/client/), and touches no DOM, so that it can be read, and run,
without the page (in a worker, or under node). The page keeps no second copy of the package's
protocol code: its routes, SSE reading, mentions and live feed come from the build."""

from __future__ import annotations

import re

import pytest

from devkit.dev_routes import PAGE_DIR

PROTOCOL_DIR = PAGE_DIR / "protocol"
PACKAGE_ENTRY = "../client/index.js"
IMPORTED = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]""")
# What exists only in a page: the document and its window, and what hangs from them.
PAGE_ONLY = re.compile(
    r"\b(document|window|CSS|HTML\w*Element|localStorage|sessionStorage|location\.|"
    r"history\.\w+State|querySelector\w*|getElementById|dataset)\b"
)
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
# What the package does, which the page must not do again: read SSE, build the routes' paths,
# find a mention being typed, join a chat's channel and follow its changes.
PACKAGE_WORK = re.compile(
    r"getReader\(|text/event-stream|/api/chats?\b|function\s+(?:mentionAt|readSse|errorOf)\b|"
    r"postgres_changes|\.subscribe\(|class\s+ChatFeed\b"
)


def protocol_modules() -> list[str]:
    return sorted(path.name for path in PROTOCOL_DIR.glob("*.js"))


def page_modules() -> list[str]:
    return sorted(
        str(path.relative_to(PAGE_DIR))
        for path in PAGE_DIR.rglob("*.js")
        if path.parent.name not in {"client", "vendor"}
    )


def imports_of(path: str) -> list[str]:
    return IMPORTED.findall(COMMENT.sub("", (PAGE_DIR / path).read_text()))


def test_the_protocol_layer_is_the_session_alone() -> None:
    assert set(protocol_modules()) == {"session.js"}
    # The package's protocol code is not copied beside it.
    for gone in ("client.js", "sse.js", "mentions.js", "feed.js"):
        assert not (PROTOCOL_DIR / gone).exists()


@pytest.mark.parametrize("name", protocol_modules())
def test_a_protocol_module_imports_only_the_protocol_and_the_package(name: str) -> None:
    imported = imports_of(f"protocol/{name}")
    own = [path for path in imported if not re.fullmatch(r"\./[\w-]+\.js", path)]
    assert [path for path in own if path != PACKAGE_ENTRY] == []


@pytest.mark.parametrize("name", protocol_modules())
def test_a_protocol_module_touches_no_page(name: str) -> None:
    code = COMMENT.sub("", (PROTOCOL_DIR / name).read_text())
    assert PAGE_ONLY.findall(code) == []


@pytest.mark.parametrize("name", page_modules())
def test_the_page_takes_the_package_from_its_entry_point(name: str) -> None:
    """Only the package's public entry point, never one of its inner modules."""
    for path in imports_of(name):
        if "client/" in path:
            assert path in {"./client/index.js", PACKAGE_ENTRY}, path


@pytest.mark.parametrize("name", page_modules())
def test_the_page_does_not_do_the_packages_work_again(name: str) -> None:
    code = COMMENT.sub("", (PAGE_DIR / name).read_text())
    assert PACKAGE_WORK.findall(code) == []


def test_the_page_is_built_on_the_package() -> None:
    users = [name for name in page_modules() if any("client/" in p for p in imports_of(name))]
    assert {"protocol/session.js", "composer.js", "completion.js"} <= set(users)


def test_the_page_follows_a_chat_with_the_packages_feed() -> None:
    """The live feed is the package's (`client.feed`), kept on the page's own model."""
    code = COMMENT.sub("", (PAGE_DIR / "live.js").read_text())
    assert "state.client.feed(" in code
