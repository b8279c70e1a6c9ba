"""Which third-party modules a Lambda entry module can import, read from the source with `ast`.

The artefacts leave out packages the Lambdas never use (the embedded Postgres, the Supabase
client, the other function's server adapter). This walk is the guard on that choice: every
module the entry module reaches, by a top-level or a lazy import, must be in the artefact.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path


class EntryModuleMissing(Exception):
    """The artefact's entry module is not in the source tree."""


def third_party_imports(root: Path, entry: str, packages: tuple[str, ...]) -> set[str]:
    """Top-level names of the non-project, non-stdlib modules reachable from `entry`."""
    if _module_file(root, entry) is None:
        raise EntryModuleMissing(entry)
    seen: set[str] = set()
    external: set[str] = set()
    pending = [entry]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _module_file(root, module)
        if path is None:
            continue
        for name in _imported_names(path, module):
            top = name.split(".")[0]
            if top in packages:
                pending.extend(_project_modules(root, name))
            elif top not in sys.stdlib_module_names and top != "__future__":
                external.add(top)
    return external


def missing_from(site: Path, modules: set[str]) -> list[str]:
    """The modules of `modules` that no file or folder at the top of `site` provides."""
    return sorted(name for name in modules if not _provides(site, name))


def _provides(site: Path, name: str) -> bool:
    if (site / name).is_dir() or (site / f"{name}.py").is_file():
        return True
    # Extension modules: name.cpython-312-x86_64-linux-gnu.so, name.abi3.so.
    return any(site.glob(f"{name}.*.so"))


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _project_modules(root: Path, name: str) -> list[str]:
    """`name` and each parent package, all of which Python executes on import."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _imported_names(path: Path, module: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    names: list[str] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            names.append(base)
            # `from package import submodule` imports the submodule too; for plain names
            # the extra entry resolves to no file and is dropped by the walk.
            names.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, except the bodies of `if TYPE_CHECKING:`, which never run."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
