"""The README and the pages under docs/ link to each other by file and heading: every relative
link must name a file of the repository and, after `#`, a heading of that file, as GitHub
renders it; any other link must be a public website."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the text may hold `code` but no nested brackets.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
LOCAL_HOSTS = re.compile(r"^(localhost|127\.|0\.0\.0\.0|\[::1\]|::1)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup or punctuation, lowercased,
    spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = HEADING.match(line)
        if fenced or not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """The targets of the links outside fenced code; a link's text may run over two lines."""
    prose: list[str] = []
    fenced = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            prose.append("")
        elif not fenced:
            prose.append(line)
    return LINK.findall("\n".join(prose))


def broken(page: Path, target: str) -> str | None:
    """What is wrong with one link of `page`, or None."""
    parts = urlsplit(target)
    if parts.scheme or target.startswith("//"):
        if parts.scheme != "https" and parts.scheme != "http":
            return "neither a repository file nor a website"
        if LOCAL_HOSTS.match(parts.hostname or ""):
            return "a local address, not a public website"
        return None
    path, _, fragment = target.partition("#")
    file = (page.parent / unquote(path)).resolve() if path else page
    if not file.is_relative_to(ROOT) or ".git" in file.relative_to(ROOT).parts:
        return "outside the repository"
    if not file.exists():
        return "no such file"
    if fragment and (file.suffix != ".md" or unquote(fragment) not in anchors(file)):
        return f"no heading #{fragment} in {file.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    # GIVEN a page a reader follows links from
    # WHEN each of its links is resolved as GitHub would
    problems = [f"{target}: {why}" for target in links(page) if (why := broken(page, target))]
    # THEN each leads to a file and heading of the repository, or to a public website
    assert problems == []


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    # GIVEN the README, the front door
    readme = ROOT / "README.md"
    linked = {
        (readme.parent / target.partition("#")[0]).resolve()
        for target in links(readme)
        if not urlsplit(target).scheme
    }
    # THEN every page under docs/ is one link away from it
    assert sorted(p.name for p in ROOT.joinpath("docs").glob("*.md") if p not in linked) == []


def test_the_checker_knows_a_broken_link() -> None:
    # GIVEN links that look fine but lead nowhere, or out of the repository
    readme = ROOT / "README.md"
    # THEN each is reported
    assert broken(readme, "docs/api.md#no-such-heading")
    assert broken(readme, "docs/no-such-page.md")
    assert broken(readme, "../shared/STYLE.md")
    assert broken(readme, "file:///etc/passwd")
    assert broken(readme, "http://127.0.0.1:8000/")
    assert broken(readme, "docs/api.md#per-user-limits") is None
    assert broken(readme, "https://docs.astral.sh/uv/") is None
