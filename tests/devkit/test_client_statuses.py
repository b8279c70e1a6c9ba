"""The dev chat page keeps its own copy of the reply status sets (it has no build step to take
them from infra/store/statuses.py, which `handoff chat` imports): it must say what the server
does."""

from __future__ import annotations

import re

import pytest

from devkit.dev_routes import PAGE_DIR
from infra.store.statuses import ENDED_REPLY_STATUSES, LIVE_REPLY_STATUSES

STATUSES_JS = PAGE_DIR / "statuses.js"


def js_set(name: str) -> set[str]:
    """The strings of `const <name> = new Set([...]);` in the page's statuses module."""
    found = re.search(rf"const {name} = new Set\(\[([^\]]*)\]\)", STATUSES_JS.read_text())
    assert found, name
    return set(re.findall(r"'([a-z_]+)'", found.group(1)))


@pytest.mark.parametrize(
    ("name", "statuses"), [("ACTIVE", LIVE_REPLY_STATUSES), ("ENDED", ENDED_REPLY_STATUSES)]
)
def test_the_chat_pages_status_sets_are_the_servers(name: str, statuses: tuple[str, ...]) -> None:
    assert js_set(name) == set(statuses)
