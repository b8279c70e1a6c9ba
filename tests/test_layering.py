"""The dependency direction of ARCHITECTURE.md, read from the source with `ast`.

agent/ is pure; handlers/ and functions/ are shells that never import each other (except the
app factory mounting the Inngest endpoint); infra/ knows nothing about either shell.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "handlers", "functions", "infra")

AGENT_FORBIDDEN = (
    "handlers",
    "functions",
    "infra",
    "fastapi",
    "starlette",
    "psycopg",
    "psycopg_pool",
    "inngest",
    "boto3",
    "supabase",
    "httpx",
    "uvicorn",
    "mangum",
)
# What agent/ may import anywhere; `langchain` itself only inside a function.
AGENT_ALLOWED = frozenset({"agent", "langchain_core", "langgraph", "pydantic"})
AGENT_LAZY_ONLY = "langchain"
HANDLERS_ALLOWED_TO_IMPORT_FUNCTIONS = "handlers/app.py"


@dataclass(frozen=True)
class Import:
    path: str  # relative to the repository root, with forward slashes
    line: int
    module: str  # absolute dotted name
    top_level: bool  # False when inside a function (a lazy import)

    @property
    def root(self) -> str:
        return self.module.split(".")[0]

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.module}"


def package_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(node: ast.ImportFrom, path: Path) -> list[str]:
    """Absolute module names of a `from ... import ...`, relative ones included."""
    if node.level == 0:
        assert node.module is not None
        return [node.module]
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    base = package[: len(package) - (node.level - 1)]
    if node.module:
        return [".".join([*base, node.module])]
    # `from . import x` may name submodules: count each.
    return [".".join([*base, alias.name]) for alias in node.names]


def imports_of(path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    relative = path.relative_to(ROOT).as_posix()
    yield from _walk(tree, path, relative, top_level=True)


def _walk(node: ast.AST, path: Path, relative: str, *, top_level: bool) -> Iterator[Import]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            for alias in child.names:
                yield Import(relative, child.lineno, alias.name, top_level)
        elif isinstance(child, ast.ImportFrom):
            for module in resolve(child, path):
                yield Import(relative, child.lineno, module, top_level)
        inner = top_level and not isinstance(
            child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        )
        yield from _walk(child, path, relative, top_level=inner)


def all_imports(package: str) -> list[Import]:
    return [found for path in package_files(package) for found in imports_of(path)]


def offenders(found: list[Import]) -> str:
    return "\n".join(str(i) for i in found)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_has_python_files(package: str) -> None:
    # Guards the other tests against passing vacuously after a move or rename.
    assert package_files(package), f"no .py files found under {package}/"


def test_agent_imports_none_of_the_outside_world() -> None:
    bad = [i for i in all_imports("agent") if i.root in AGENT_FORBIDDEN]
    assert not bad, "agent/ must stay pure:\n" + offenders(bad)


def test_agent_imports_only_the_stdlib_langchain_core_langgraph_and_pydantic() -> None:
    bad = [
        i
        for i in all_imports("agent")
        if i.root not in AGENT_ALLOWED
        and i.root not in sys.stdlib_module_names
        and not (i.root == AGENT_LAZY_ONLY and not i.top_level)
    ]
    assert not bad, "agent/ imports outside its allowed dependencies:\n" + offenders(bad)


def test_agent_imports_langchain_only_lazily() -> None:
    # `langchain` pulls in provider integrations; agent/ loads it only when a real model is made.
    bad = [i for i in all_imports("agent") if i.root == AGENT_LAZY_ONLY and i.top_level]
    assert not bad, "agent/ must import langchain inside a function:\n" + offenders(bad)


def test_handlers_import_functions_only_in_the_app_factory() -> None:
    bad = [
        i
        for i in all_imports("handlers")
        if i.root == "functions" and i.path != HANDLERS_ALLOWED_TO_IMPORT_FUNCTIONS
    ]
    assert not bad, "only handlers/app.py may import functions/:\n" + offenders(bad)


def test_functions_never_import_handlers() -> None:
    bad = [i for i in all_imports("functions") if i.root == "handlers"]
    assert not bad, "functions/ must not import handlers/:\n" + offenders(bad)


def test_infra_imports_neither_shell() -> None:
    bad = [i for i in all_imports("infra") if i.root in ("handlers", "functions")]
    assert not bad, "infra/ must not import handlers/ or functions/:\n" + offenders(bad)


# --- the checker itself ----------------------------------------------------------------------


def test_checker_sees_nested_relative_and_lazy_imports() -> None:
    # GIVEN a module with imports in every place the checks must look
    package = ROOT / "agent"
    source = (
        "import os, fastapi.routing\n"
        "from . import graph\n"
        "from .state import AgentState\n"
        "if os.name:\n"
        "    import psycopg\n"
        "try:\n"
        "    from langchain import chat_models\n"
        "except ImportError:\n"
        "    pass\n"
        "class Holder:\n"
        "    import infra.db\n"
        "def make() -> None:\n"
        "    from langchain.chat_models import init_chat_model\n"
        "    async def inner() -> None:\n"
        "        import boto3\n"
    )
    tree = ast.parse(source)

    # WHEN it is read as if it lived in agent/
    found = list(_walk(tree, package / "probe.py", "agent/probe.py", top_level=True))

    # THEN every import is found with its line and whether it runs at import time
    assert [(i.line, i.module, i.top_level) for i in found] == [
        (1, "os", True),
        (1, "fastapi.routing", True),
        (2, "agent.graph", True),
        (3, "agent.state", True),
        (5, "psycopg", True),
        (7, "langchain", True),
        (11, "infra.db", True),
        (13, "langchain.chat_models", False),
        (15, "boto3", False),
    ]
    assert str(found[4]) == "agent/probe.py:5: imports psycopg"
