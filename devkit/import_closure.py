"""Which third-party modules a Lambda entry module can import, read from the source by grimp.

The artefacts leave out packages the Lambdas never use (the embedded Postgres, the Supabase
client, the other function's server adapter). This walk is the guard on that choice: every
module the entry module reaches, by a top-level or a lazy import, must be in the artefact.
Imports under `if TYPE_CHECKING:` never run, so they do not count.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import grimp


class EntryModuleMissing(Exception):
    """The artefact's entry module is not in the source tree."""


class SourceElsewhere(Exception):
    """Python would import a project package from somewhere other than the tree being packaged."""


def third_party_imports(root: Path, entry: str, packages: tuple[str, ...]) -> set[str]:
    """Top-level names of the non-project, non-stdlib modules reachable from `entry`.

    grimp finds `packages` where Python would import them from, which must be `root`.
    """
    _check_source(root, packages)
    # No cache: grimp's default one is a folder in the working directory.
    graph = grimp.build_graph(
        *packages,
        include_external_packages=True,
        exclude_type_checking_imports=True,
        cache_dir=None,
    )
    if entry not in graph.modules:
        raise EntryModuleMissing(entry)
    # grimp names an external package by its top-level module; the stdlib counts as external.
    tops = {module.split(".")[0] for module in _executed(graph, entry)}
    return {top for top in tops if top not in packages and top not in sys.stdlib_module_names}


def missing_from(site: Path, modules: set[str]) -> list[str]:
    """The modules of `modules` that no file or folder at the top of `site` provides."""
    return sorted(name for name in modules if not _provides(site, name))


def _provides(site: Path, name: str) -> bool:
    if (site / name).is_dir() or (site / f"{name}.py").is_file():
        return True
    # Extension modules: name.cpython-312-x86_64-linux-gnu.so, name.abi3.so.
    return any(site.glob(f"{name}.*.so"))


def _check_source(root: Path, packages: tuple[str, ...]) -> None:
    for package in packages:
        spec = importlib.util.find_spec(package)
        found = [Path(p).resolve() for p in (spec and spec.submodule_search_locations) or ()]
        expected = (root / package).resolve()
        if found != [expected]:
            where = ", ".join(map(str, found)) or "nowhere"
            raise SourceElsewhere(f"{package} would be imported from {where}, not {expected}")


def _executed(graph: grimp.ImportGraph, entry: str) -> set[str]:
    """The modules importing `entry` runs: what it imports, transitively, and the `__init__`
    of every package on the way, which grimp does not count as imported."""
    seen: set[str] = set()
    pending = [entry]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        pending.extend(graph.find_modules_directly_imported_by(module))
        if "." in module:
            pending.append(module.rpartition(".")[0])
    return seen
