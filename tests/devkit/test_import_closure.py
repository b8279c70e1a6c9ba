"""What a Lambda's entry modules can import, as the packaging check reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.import_closure import (
    EntryModuleMissing,
    SourceElsewhere,
    missing_from,
    third_party_imports,
)
from devkit.lambda_package import PackagingError, check_imports

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
# An assistants' module of one file, which no entry imports: ASSISTANTS names it.
SOLO = "closure_solo"
SOLO_SOURCE = (
    "import typing\n"
    "from closure_probe.deep.leaf import VALUE\n"
    "from solo_dep.tools import tool\n"
    "if typing.TYPE_CHECKING:\n"
    "    import solo_typing_dep\n"
    "else:\n"
    "    import solo_runtime_dep\n"
    "def later() -> None:\n"
    "    import solo_lazy_dep\n"
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, source in MODULES.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    (tmp_path / f"{SOLO}.py").write_text(SOLO_SOURCE)
    monkeypatch.syspath_prepend(tmp_path)
    return tmp_path


def test_counts_what_importing_the_entry_runs(root: Path) -> None:
    # Lazy imports and package __init__s on the way count; the stdlib, TYPE_CHECKING blocks and
    # modules the entry never reaches do not. Each comes with the modules that import it.
    sources = {PACKAGE: root / PACKAGE}
    assert third_party_imports(sources, [f"{PACKAGE}.entry"]) == {
        "init_dep": {PACKAGE},
        "helper_dep": {f"{PACKAGE}.helpers"},
        "deep_init_dep": {f"{PACKAGE}.deep"},
        "lazy_dep": {f"{PACKAGE}.entry"},
    }


def test_counts_what_a_module_of_one_file_imports(root: Path) -> None:
    # GIVEN an assistants' module that is one file, importing a package of ours and others
    # WHEN it is an entry, THEN its own imports count, and so do those of the modules of ours
    # it imports
    sources = {PACKAGE: root / PACKAGE, SOLO: root / f"{SOLO}.py"}
    assert third_party_imports(sources, [SOLO]) == {
        "solo_dep": {SOLO},
        "solo_runtime_dep": {SOLO},
        "solo_lazy_dep": {SOLO},
        "init_dep": {PACKAGE},
        "deep_init_dep": {f"{PACKAGE}.deep"},
    }


def test_an_entry_module_that_is_not_there_is_an_error(root: Path) -> None:
    with pytest.raises(EntryModuleMissing):
        third_party_imports({PACKAGE: root / PACKAGE}, [f"{PACKAGE}.gone"])


def test_a_tree_python_would_not_import_from_is_an_error(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(SourceElsewhere, match=f"{PACKAGE} would be imported from {root}"):
        third_party_imports({PACKAGE: elsewhere / PACKAGE}, [f"{PACKAGE}.entry"])
    with pytest.raises(SourceElsewhere, match=f"{SOLO} would be imported from {root}"):
        third_party_imports({SOLO: elsewhere / f"{SOLO}.py"}, [SOLO])


def test_the_check_names_what_is_left_out_and_the_module_that_imports_it(
    root: Path, tmp_path: Path
) -> None:
    # GIVEN a site with all but one of what the entries import
    site = tmp_path / "site"
    for name in ("init_dep", "helper_dep", "deep_init_dep", "lazy_dep", "solo_runtime_dep"):
        (site / name).mkdir(parents=True)
    (site / "solo_lazy_dep.py").touch()
    sources = {PACKAGE: root / PACKAGE, SOLO: root / f"{SOLO}.py"}
    # WHEN the artefact is checked, THEN the error names it and the module that imports it
    with pytest.raises(PackagingError) as raised:
        check_imports("respond", site, sources, [f"{PACKAGE}.entry", SOLO])
    assert str(raised.value).startswith(
        f"respond: the artefact leaves out solo_dep (imported by {SOLO}). "
    )
    (site / "solo_dep").mkdir()
    check_imports("respond", site, sources, [f"{PACKAGE}.entry", SOLO])


def test_missing_from_accepts_packages_modules_and_extension_modules(tmp_path: Path) -> None:
    (tmp_path / "package").mkdir()
    (tmp_path / "module.py").touch()
    (tmp_path / "extension.cpython-312-x86_64-linux-gnu.so").touch()
    modules = {"package", "module", "extension", "absent", "other"}
    assert missing_from(tmp_path, modules) == ["absent", "other"]
