"""The clients ask about the server's status sets, never a copy: `handoff chat` imports them from
infra/store/statuses.py, and the dev page imports `/dev/statuses.js`, which the dev server makes
from that module. No page file spells a list of statuses of its own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from devkit.dev_routes import PAGE_DIR, status_sets
from infra.store import statuses
from tests.devkit.test_dev_routes import dev_app

EXPORTED = re.compile(r"^export const (\w+) = Object\.freeze\((\[.*\])\);$", re.MULTILINE)
STATUS_NAMES = sorted(set(statuses.JOB_STATUSES) | set(statuses.MESSAGE_STATUSES))
STATUS = "|".join(STATUS_NAMES)
QUOTED = re.compile(rf"""(['"`])(?:{STATUS})\1""")
# A literal array (or a Set's) of its own, with no brackets inside: two statuses in it are a list.
ARRAY = re.compile(r"\[[^\[\]]*\]")
# `s === 'queued' || s === 'streaming'`: a list spelled as comparisons, joined in one expression.
COMPARED = re.compile(
    rf"""[!=]==\s*(['"])(?:{STATUS})\1\s*(?:\|\||&&)[^;{{}}]*?[!=]==\s*(['"])(?:{STATUS})\2"""
)
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def page_files() -> list[Path]:
    """The page's own code: its modules and its HTML, not the vendored supabase-js nor the
    JavaScript client's build (client/, whose two sets tests/clients/test_page_build.py holds
    to the server's)."""
    others = (PAGE_DIR / "vendor", PAGE_DIR / "client")
    return sorted(
        path
        for path in [*PAGE_DIR.rglob("*.js"), *PAGE_DIR.rglob("*.html")]
        if not any(other in path.parents for other in others)
    )


def hand_written_lists(code: str) -> list[str]:
    """The status lists `code` spells itself: arrays holding two statuses or more, and chains
    of comparisons with two statuses or more."""
    code = COMMENT.sub("", code)
    arrays = [found for found in ARRAY.findall(code) if len(QUOTED.findall(found)) >= 2]
    return arrays + [found.group(0) for found in COMPARED.finditer(code)]


async def test_the_page_imports_the_servers_status_sets(database_url: str) -> None:
    transport = dev_app(database_url)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        module = await http.get("/dev/statuses.js")
    assert module.status_code == 200
    assert "javascript" in module.headers["content-type"]
    served = {name: tuple(json.loads(values)) for name, values in EXPORTED.findall(module.text)}
    # every set, by its Python name, in its order; among them those the page asks about
    assert served == status_sets()
    assert served["LIVE_REPLY_STATUSES"] == statuses.LIVE_REPLY_STATUSES
    assert served["ENDED_REPLY_STATUSES"] == statuses.ENDED_REPLY_STATUSES
    # served, not kept beside the page's modules as a copy
    assert not (PAGE_DIR / "statuses.js").exists()


@pytest.mark.parametrize("path", page_files(), ids=lambda path: str(path.relative_to(PAGE_DIR)))
def test_no_page_file_spells_a_status_list(path: Path) -> None:
    assert hand_written_lists(path.read_text()) == []


@pytest.mark.parametrize(
    ("code", "found"),
    [
        ("const ACTIVE = new Set(['queued', 'streaming', 'paused']);", 1),
        ("ok = s === 'queued' ||\n  s === 'streaming';", 1),
        ("x = LIVE_REPLY_STATUSES.includes(s) && s !== 'paused';", 0),
        ("labels = ['running', 'done'];", 0),
        ("// once ['queued', 'streaming']\n", 0),
    ],
)
def test_a_hand_written_status_list_is_found(code: str, found: int) -> None:
    assert len(hand_written_lists(code)) == found
