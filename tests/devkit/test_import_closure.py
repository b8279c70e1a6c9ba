"""What a Lambda entry module can import, as the packaging check reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.import_closure import (
    EntryModuleMissing,
    SourceElsewhere,
    missing_from,
    third_party_imports,
)

PACKAGE = "closure_probe"
MODULES = {
    "__init__.py": "import init_dep\n",
    "entry.py": (
        "from __future__ import annotations\n"
        "import json\n"
        "from typing import TYPE_CHECKING\n"
        "from . import helpers\n"
        "from .deep.leaf import VALUE\n"
        "if TYPE_CHECKING:\n"
        "    import typing_only_dep\n"
        "def later() -> None:\n"
        "    import lazy_dep.sub\n"
    ),
    "helpers.py": "import helper_dep.api\n",
    "deep/__init__.py": "import deep_init_dep\n",
    "deep/leaf.py": "VALUE = 1\n",
    "unreached.py": "import unreached_dep\n",
}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, source in MODULES.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    monkeypatch.syspath_prepend(tmp_path)
    return tmp_path


def test_counts_what_importing_the_entry_runs(root: Path) -> None:
    # Lazy imports and package __init__s on the way count; the stdlib, TYPE_CHECKING blocks and
    # modules the entry never reaches do not.
    assert third_party_imports(root, f"{PACKAGE}.entry", (PACKAGE,)) == {
        "init_dep",
        "helper_dep",
        "deep_init_dep",
        "lazy_dep",
    }


def test_an_entry_module_that_is_not_there_is_an_error(root: Path) -> None:
    with pytest.raises(EntryModuleMissing):
        third_party_imports(root, f"{PACKAGE}.gone", (PACKAGE,))


def test_a_tree_python_would_not_import_from_is_an_error(root: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceElsewhere, match=f"{PACKAGE} would be imported from {root}"):
        third_party_imports(tmp_path / "elsewhere", f"{PACKAGE}.entry", (PACKAGE,))


def test_missing_from_accepts_packages_modules_and_extension_modules(tmp_path: Path) -> None:
    (tmp_path / "package").mkdir()
    (tmp_path / "module.py").touch()
    (tmp_path / "extension.cpython-312-x86_64-linux-gnu.so").touch()
    modules = {"package", "module", "extension", "absent", "other"}
    assert missing_from(tmp_path, modules) == ["absent", "other"]
