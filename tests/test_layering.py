"""The dependency rules between our packages, read from the source by grimp.

The rules among our own packages are import-linter contracts in pyproject.toml; this runs them.
What a contract cannot say is checked here on grimp's graph: agent/ imports only the stdlib and
an allow-list of third-party packages, and `langchain` only inside a function (grimp records
every import's line, not whether a function encloses it, so `ast` answers that); and the
modules of handlers/ import no other of handlers/ but its shared helpers, a rule that must also
hold for a module added later, which a contract would have to be told of.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "turns", "handlers", "functions", "infra", "devkit", "demo")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# What agent/ may import anywhere; `langchain` itself only inside a function.
AGENT_ALLOWED = frozenset({"agent", "langchain_core", "langgraph", "pydantic"})
AGENT_LAZY_ONLY = "langchain"

# What every module of handlers/ may import of handlers/; what two routes share beyond these
# belongs in turns/. The app factory and the Lambda's entry put the routes together.
HANDLERS_SHARED = frozenset(
    f"handlers.{name}" for name in ("auth", "deps", "errors", "error_responses", "fields", "sse")
)
HANDLERS_ASSEMBLY = frozenset({"handlers/app.py", "handlers/lambda_respond.py"})


@dataclass(frozen=True)
class Import:
    path: str  # relative to the root the graph was read from, with forward slashes
    line: int
    module: str  # what grimp says is imported; a third-party package by its top-level name
    lazy: bool  # inside a function: runs when it is called, not on import

    @property
    def root(self) -> str:
        return self.module.split(".")[0]

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.module}"


def build_graph(*packages: str) -> grimp.ImportGraph:
    # No cache: grimp's default one is a folder in the working directory.
    return grimp.build_graph(*packages, include_external_packages=True, cache_dir=None)


def imports_of(graph: grimp.ImportGraph, package: str, root: Path) -> list[Import]:
    """Every import statement in `package`, in module and line order."""
    found = []
    for importer in sorted({package, *graph.find_descendants(package)}):
        path = module_file(root, importer)
        functions = function_lines(path)
        for imported in graph.find_modules_directly_imported_by(importer):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                line = int(detail["line_number"])
                relative = path.relative_to(root).as_posix()
                found.append(Import(relative, line, imported, line in functions))
    return sorted(found, key=lambda i: (i.path, i.line, i.module))


def module_file(root: Path, module: str) -> Path:
    base = root.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def function_lines(path: Path) -> set[int]:
    """The lines of the module at `path` that lie inside a function (a lambda holds no import)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {
        line
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }


def outside_allow_list(found: list[Import], allowed: frozenset[str]) -> list[Import]:
    return [
        i
        for i in found
        if i.root not in allowed
        and i.root not in sys.stdlib_module_names
        and not (i.root == AGENT_LAZY_ONLY and i.lazy)
    ]


def cross_imports(
    found: list[Import], package: str, shared: frozenset[str], assembly: frozenset[str]
) -> list[Import]:
    """Imports of `package`'s own modules but `shared`, by modules not in `assembly` (paths)."""
    return [
        i for i in found if i.root == package and i.module not in shared and i.path not in assembly
    ]


def eager(found: list[Import], package: str) -> list[Import]:
    return [i for i in found if i.root == package and not i.lazy]


def offenders(found: list[Import]) -> str:
    return "\n".join(str(i) for i in found)


@pytest.fixture(scope="module")
def agent_imports() -> list[Import]:
    return imports_of(build_graph(*PACKAGES), "agent", ROOT)


def test_the_contracts_cover_every_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert tuple(config["tool"]["importlinter"]["root_packages"]) == PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_the_graph_holds_every_module_of_each_package(package: str) -> None:
    # Guards the rules against passing vacuously after a move or rename, or reading another tree.
    on_disk = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / package).rglob("*.py")
    }
    assert on_disk, f"no .py files found under {package}/"
    # devkit/ has no __init__.py; grimp still counts the package itself as a module.
    assert build_graph(package).find_descendants(package) == on_disk - {package}


def test_the_import_contracts_hold() -> None:
    result = subprocess.run(  # noqa: S603
        [LINT_IMPORTS, "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_agent_imports_only_the_stdlib_langchain_core_langgraph_and_pydantic(
    agent_imports: list[Import],
) -> None:
    bad = outside_allow_list(agent_imports, AGENT_ALLOWED)
    assert not bad, "agent/ imports outside its allowed dependencies:\n" + offenders(bad)


def test_agent_imports_langchain_only_lazily(agent_imports: list[Import]) -> None:
    # `langchain` pulls in provider integrations; agent/ loads it only when a real model is made.
    bad = eager(agent_imports, AGENT_LAZY_ONLY)
    assert not bad, "agent/ must import langchain inside a function:\n" + offenders(bad)


def test_handler_modules_import_only_the_shared_helpers_of_handlers() -> None:
    found = imports_of(build_graph("handlers"), "handlers", ROOT)
    # Guards against a vacuous pass: the check sees imports within handlers/.
    assert any(i.module == "handlers.deps" for i in found)
    bad = cross_imports(found, "handlers", HANDLERS_SHARED, HANDLERS_ASSEMBLY)
    assert not bad, (
        "a module of handlers/ imports another that is not a shared helper "
        f"({', '.join(sorted(HANDLERS_SHARED))}); move what they share to turns/:\n"
        + offenders(bad)
    )


def app_state_reads(path: Path) -> list[int]:
    """The lines of the module at `path` that reach the app's state through a request or a
    route's app (`request.app.state`, `x.app.state`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "state"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "app"
    )


def test_routes_take_the_app_state_through_dependencies_only() -> None:
    # handlers/deps.py hands out what the app holds; a route names it in its signature.
    reads = {
        path.relative_to(ROOT).as_posix(): lines
        for path in sorted((ROOT / "handlers").glob("*.py"))
        if path.name != "deps.py" and (lines := app_state_reads(path))
    }
    assert reads == {}, "read the app's state through handlers/deps.py instead"
    assert app_state_reads(ROOT / "handlers" / "deps.py")  # guards against a vacuous pass


# --- the checks themselves --------------------------------------------------------------------

# Imports in every place the checks must look.
PROBE_SOURCE = """\
from typing import TYPE_CHECKING
import os, fastapi.routing
from . import state
from .state import AgentState
if os.name:
    import psycopg
try:
    from langchain import chat_models
except ImportError:
    pass
class Holder:
    import infra.db
def make() -> None:
    from langchain.chat_models import init_chat_model
    async def inner() -> None:
        import boto3
if TYPE_CHECKING:
    import httpx
"""


def test_the_checks_see_nested_relative_lazy_and_type_checking_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a package with imports in every place the checks must look
    package = tmp_path / "layering_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "state.py").write_text("")
    (package / "probe.py").write_text(PROBE_SOURCE)
    monkeypatch.syspath_prepend(tmp_path)

    # WHEN its imports are read
    found = imports_of(build_graph("layering_probe"), "layering_probe", tmp_path)

    # THEN every import is found with its line and whether it runs only in a function
    assert [(i.path, i.line, i.module, i.lazy) for i in found] == [
        ("layering_probe/probe.py", 1, "typing", False),
        ("layering_probe/probe.py", 2, "fastapi", False),
        ("layering_probe/probe.py", 2, "os", False),
        ("layering_probe/probe.py", 3, "layering_probe.state", False),
        ("layering_probe/probe.py", 4, "layering_probe.state", False),
        ("layering_probe/probe.py", 6, "psycopg", False),
        ("layering_probe/probe.py", 8, "langchain", False),
        ("layering_probe/probe.py", 12, "infra", False),
        ("layering_probe/probe.py", 14, "langchain", True),
        ("layering_probe/probe.py", 16, "boto3", True),
        ("layering_probe/probe.py", 18, "httpx", False),
    ]
    assert str(found[5]) == "layering_probe/probe.py:6: imports psycopg"
    # AND the agent rules flag what they should, and langchain only where it runs on import
    assert [str(i) for i in eager(found, AGENT_LAZY_ONLY)] == [
        "layering_probe/probe.py:8: imports langchain"
    ]
    allowed = AGENT_ALLOWED | {"layering_probe"}
    assert {i.module for i in outside_allow_list(found, allowed)} == {
        "fastapi",
        "psycopg",
        "langchain",
        "infra",
        "boto3",
        "httpx",
    }
