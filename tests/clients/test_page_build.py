"""The dev page runs on the JavaScript client: devkit/dev_page/client/ is the package's tsc
output (clients/js/tsconfig.page.json: its entry point and what that imports, as ES modules),
committed so that `handoff dev` serves the page with no Node build. A fresh build must equal
it: a change to clients/js/src/ without `npm run --prefix clients/js build:page` fails here.

Skipped, with the reason, without node or the package's dependencies, except under CI, where
.ci/run installs both."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from devkit.dev_routes import PAGE_DIR
from infra.store import statuses
from tests.clients.test_js_client import PACKAGE, node_and_package

COMMITTED = PAGE_DIR / "client"
FROZEN = re.compile(r"export const (\w+) = Object\.freeze\((\[[^\]]*\])\);")


def files_under(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


async def test_the_committed_build_is_a_fresh_build_of_the_package(tmp_path: Path) -> None:
    node = node_and_package()
    tsc = PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"
    config = PACKAGE / "tsconfig.page.json"
    child = await asyncio.create_subprocess_exec(
        node, str(tsc), "-p", str(config), "--outDir", str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    assert child.returncode == 0, out.decode()
    fresh = files_under(tmp_path)
    assert "index.js" in fresh
    assert files_under(COMMITTED) == fresh


def test_the_committed_build_imports_nothing_but_itself() -> None:
    """A browser loads it as it is: every import is one of its own files (supabase-js, a peer
    dependency, is passed in by the page, never imported)."""
    imported = re.compile(r"""\bfrom\s*['"]([^'"]+)['"]|\bimport\s*\(?\s*['"]([^'"]+)['"]""")
    for name, code in files_under(COMMITTED).items():
        for match in imported.finditer(code):
            target = match.group(1) or match.group(2)
            assert re.fullmatch(r"\./[\w-]+\.js", target), (name, target)
            assert (COMMITTED / target).is_file(), (name, target)


def test_the_packages_status_sets_are_the_servers() -> None:
    """The package spells the reply statuses it sorts by (the page takes the server's from
    /dev/statuses.js); they must be the server's."""
    found = {
        name: tuple(re.findall(r"'(\w+)'", values))
        for name, values in FROZEN.findall((COMMITTED / "types.js").read_text())
    }
    assert found == {
        "LIVE_REPLY_STATUSES": statuses.LIVE_REPLY_STATUSES,
        "ENDED_REPLY_STATUSES": statuses.ENDED_REPLY_STATUSES,
    }
