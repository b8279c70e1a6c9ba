"""Which third-party modules a Lambda can import, read from the source by grimp.

The artefacts leave out packages the Lambdas never use (the embedded Postgres, the Supabase
client, the other function's server adapter). This walk is the guard on that choice: every
module an entry reaches (the Lambda's entry module, and the assistants' module that ASSISTANTS
names), by a top-level or a lazy import, must be in the artefact. Imports under
`if TYPE_CHECKING:` never run, so they do not count.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import grimp


class EntryModuleMissing(Exception):
    """An entry module is not in the source tree."""


class SourceElsewhere(Exception):
    """Python would import a project package from somewhere other than the tree being packaged."""


def third_party_imports(sources: Mapping[str, Path], entries: Sequence[str]) -> dict[str, set[str]]:
    """The top-level names of the non-stdlib modules outside `sources` that importing `entries`
    runs, each with the modules of `sources` that import it.

    `sources` maps each top-level name to its package's folder or, for a module of one file,
    that file: where Python must import it from, since grimp reads it from there.
    """
    _check_sources(sources)
    packages = [name for name, path in sources.items() if path.is_dir()]
    # No cache: grimp's default one is a folder in the working directory.
    graph = grimp.build_graph(
        *packages,
        include_external_packages=True,
        exclude_type_checking_imports=True,
        cache_dir=None,
    )
    # grimp reads packages alone: a module of one file is added with the imports ast finds.
    for name, path in sources.items():
        if path.is_file():
            graph.add_module(name)
            for imported in _file_imports(path):
                graph.add_import(importer=name, imported=_graph_name(graph, imported))
    for entry in entries:
        if entry not in graph.modules:
            raise EntryModuleMissing(entry)
    importers: dict[str, set[str]] = {}
    for module in _executed(graph, entries):
        for imported in graph.find_modules_directly_imported_by(module):
            top = imported.split(".")[0]
            if top not in sources and top not in sys.stdlib_module_names:
                importers.setdefault(top, set()).add(module)
    return importers


def missing_from(site: Path, modules: set[str]) -> list[str]:
    """The modules of `modules` that no file or folder at the top of `site` provides."""
    return sorted(name for name in modules if not _provides(site, name))


def _provides(site: Path, name: str) -> bool:
    if (site / name).is_dir() or (site / f"{name}.py").is_file():
        return True
    # Extension modules: name.cpython-312-x86_64-linux-gnu.so, name.abi3.so.
    return any(site.glob(f"{name}.*.so"))


def _check_sources(sources: Mapping[str, Path]) -> None:
    for name, expected in sources.items():
        spec = importlib.util.find_spec(name)
        if spec is None:
            found = []
        elif spec.submodule_search_locations is not None:
            found = [Path(p).resolve() for p in spec.submodule_search_locations]
        else:
            found = [Path(spec.origin).resolve()] if spec.origin else []
        if found != [expected.resolve()]:
            where = ", ".join(map(str, found)) or "nowhere"
            raise SourceElsewhere(f"{name} would be imported from {where}, not {expected}")


def _file_imports(path: Path) -> set[str]:
    """The modules a module's source imports, at any depth, but for `if TYPE_CHECKING:`."""
    imports = _Imports()
    imports.visit(ast.parse(path.read_text(), filename=str(path)))
    return imports.found


class _Imports(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        for child in node.orelse if name == "TYPE_CHECKING" else (*node.body, *node.orelse):
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # A module of one file is top-level: it has no relative imports.
        if node.module:
            self.found.update(f"{node.module}.{alias.name}" for alias in node.names)


def _graph_name(graph: grimp.ImportGraph, imported: str) -> str:
    """The module of the graph that `imported` names: `a.b.c` is module `a.b` when `c` is a
    name it defines; a third-party module is its top-level name, as grimp keeps it."""
    candidate = imported
    while "." in candidate and candidate not in graph.modules:
        candidate = candidate.rpartition(".")[0]
    return candidate


def _executed(graph: grimp.ImportGraph, entries: Sequence[str]) -> set[str]:
    """The modules importing `entries` runs: what they import, transitively, and the
    `__init__` of every package on the way, which grimp does not count as imported."""
    seen: set[str] = set()
    pending = list(entries)
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        pending.extend(graph.find_modules_directly_imported_by(module))
        if "." in module:
            pending.append(module.rpartition(".")[0])
    return seen
