"""What `handoff package` puts into the zips for the assistants ASSISTANTS names (the build
itself: tests/deploy/)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.packaged_assistants import AssistantsNotPackable, assistants_code
from infra.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
HANDOFF = str(Path(sys.executable).parent / "handoff")
ASSISTANTS_SOURCE = (
    "from langchain_core.tools import tool\n"
    "from agent.assistants import Assistant\n"
    "@tool\n"
    "def stock(sku: str) -> str:\n"
    '    """How many of `sku` are in stock."""\n'
    "    return '3'\n"
    "ASSISTANTS = [\n"
    "    Assistant(id='stock', name='Stock', model='openai:gpt-4o-mini', tools=[stock]),\n"
    "    Assistant(id='chat', name='Chat'),\n"
    "    Assistant(id='offline', name='Offline', model='scripted'),\n"
    "]\n"
)


def handoff_package(out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the project's own console script
        [HANDOFF, "package", "--out", str(out)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_demo_set_ships_demo_with_no_extra() -> None:
    code = assistants_code(Settings(assistants="demo.assistants:ASSISTANTS", model="scripted"))
    assert (code.module, code.top, code.path) == ("demo.assistants", "demo", ROOT / "demo")
    assert code.extras == ()


def test_a_package_of_the_users_ships_whole_with_each_models_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a package outside the checkout whose assistants use openai, MODEL (anthropic) and
    # the scripted model
    package = tmp_path / "pack_probe_shop"
    (package / "agents").mkdir(parents=True)
    (package / "__init__.py").touch()
    (package / "agents" / "__init__.py").touch()
    (package / "agents" / "team.py").write_text(ASSISTANTS_SOURCE)
    monkeypatch.syspath_prepend(tmp_path)
    # WHEN `handoff package` finds them
    settings = Settings(
        assistants="pack_probe_shop.agents.team:ASSISTANTS", model="anthropic:claude-sonnet-4-5"
    )
    code = assistants_code(settings)
    # THEN the zips get the top-level package and both providers' extras
    assert (code.top, code.path) == ("pack_probe_shop", package)
    assert code.extras == ("anthropic", "openai")


def test_a_module_of_one_file_ships_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pack_probe_solo.py").write_text(ASSISTANTS_SOURCE)
    monkeypatch.syspath_prepend(tmp_path)
    code = assistants_code(
        Settings(assistants="pack_probe_solo:ASSISTANTS", model="openai:gpt-4o-mini")
    )
    assert (code.top, code.path, code.extras) == (
        "pack_probe_solo",
        tmp_path / "pack_probe_solo.py",
        ("openai",),
    )


def test_assistants_in_a_package_one_zip_leaves_out_are_refused() -> None:
    with pytest.raises(AssistantsNotPackable, match="devkit/ is not in both Lambda zips"):
        assistants_code(Settings(assistants="devkit.assistants:ASSISTANTS"))


def test_handoff_package_stops_in_one_sentence_when_the_module_is_not_found(
    tmp_path: Path,
) -> None:
    # GIVEN ASSISTANTS naming a module Python cannot find, WHEN `handoff package` runs, THEN it
    # says so in one sentence and exits 1, with no zip built
    result = handoff_package(tmp_path / "dist", ASSISTANTS="pack_probe_absent.assistants:TEAM")
    assert result.returncode == 1
    assert result.stderr == (
        "handoff package: ASSISTANTS=pack_probe_absent.assistants:TEAM: module"
        " 'pack_probe_absent.assistants' cannot be imported (No module named"
        " 'pack_probe_absent'; put the folder that holds it on PYTHONPATH).\n"
    )
    assert not (tmp_path / "dist").exists()
