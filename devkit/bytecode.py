"""Bytecode for an artefact, compiled by the Python that will run it.

Lambda's task root is read-only: a module without bytecode beside it is compiled from source at
every cold start, and that compiling is about half of a cold start without SnapStart. So each
artefact carries its bytecode, made by an interpreter of the Lambda runtime's own version
(bytecode of another version is ignored), where the import system looks for it
(`__pycache__/<module>.cpython-312.pyc`), and checked against nothing at import: the zip's
entries all carry the same 1980 timestamp, so a timestamp check would be meaningless, and the
source beside it never changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Where Lambda unzips the function's code: the name tracebacks show for its files.
TASK_ROOT = "/var/task"
# Names the interpreter to compile with, as `handoff package --python` does.
PYTHON_VARIABLE = "HANDOFF_PACKAGE_PYTHON"
# Run by the artefact's interpreter. Each file is compiled on its own (`compile_file`), so one
# that fails (a test of a dependency written for another Python, a template) is listed rather
# than stopping the rest. Two things would make the bytes differ from build to build: a set
# literal's constant is stored in its iteration order, which follows the strings' hashes (so the
# hash seed is fixed), and marshal marks an object for sharing when anything else in the
# compiling process holds it too, which depends on what that process compiled before (so each
# fixed chunk of the sorted files is compiled by a fresh process).
_COMPILE = """
import compileall, concurrent.futures, functools, os, py_compile, sys
root, prefix, CHUNK = sys.argv[1], sys.argv[2], 64
files = sorted(
    os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".py")
)
one = functools.partial(
    compileall.compile_file, quiet=2, stripdir=root, prependdir=prefix,
    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
)
with concurrent.futures.ProcessPoolExecutor(max_tasks_per_child=1) as pool:
    results = list(pool.map(one, files, chunksize=CHUNK))
for path, ok in zip(files, results):
    if not ok:
        print(os.path.relpath(path, root))
"""


class BytecodeError(Exception):
    """No interpreter of the right version to compile with, or our own code does not compile."""


def compiling_python(version: str, uv: str, given: Path | None = None) -> Path:
    """An interpreter of Python `version` ("3.12") to compile an artefact's bytecode: `given`
    (or HANDOFF_PACKAGE_PYTHON), else this one if it is that version, else the one
    `uv python find` finds, else one pyenv installed."""
    if given is None and os.environ.get(PYTHON_VARIABLE):
        given = Path(os.environ[PYTHON_VARIABLE])
    if given is not None:
        found = _version_of(given)
        if found != version:
            raise BytecodeError(
                f"{given} is Python {found}, and Lambda runs {version}: its bytecode would be"
                " ignored"
            )
        return given
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return Path(sys.executable)
    result = subprocess.run(  # noqa: S603 - uv with literal arguments
        [uv, "python", "find", "--no-project", version],
        capture_output=True,
        text=True,
        check=False,
    )
    found_path = Path(result.stdout.strip()) if result.returncode == 0 else _pyenv_python(version)
    if found_path is None or _version_of(found_path) != version:
        raise BytecodeError(
            f"Lambda runs Python {version}, and this is {sys.version_info.major}."
            f"{sys.version_info.minor}: bytecode from another version would be ignored, and"
            f" none was found to compile with. Install one (`uv python install {version}`)"
            f" or name it with --python or {PYTHON_VARIABLE}."
        )
    return found_path


def _pyenv_python(version: str) -> Path | None:
    """The newest `version` pyenv installed, which `uv python find` misses behind pyenv's shims
    when that version is not among the ones pyenv makes global."""
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    found = sorted(
        Path(root).glob(f"versions/{version}.*/bin/python{version}"),
        key=lambda p: [int(n) if n.isdigit() else 0 for n in p.parts[-3].split(".")],
    )
    return found[-1] if found else None


def compile_tree(staging: Path, python: Path, ours: tuple[str, ...]) -> tuple[str, ...]:
    """Compile every module under `staging` with `python`, for the task root; the files that
    do not compile (paths relative to `staging`), none of them under the top-level names
    `ours`."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    for name in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
        env.pop(name, None)
    result = subprocess.run(  # noqa: S603 - a known interpreter and a literal program
        [str(python), "-s", "-c", _COMPILE, str(staging), TASK_ROOT],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise BytecodeError(f"compiling the bytecode failed:\n{result.stderr.strip()}")
    failed = tuple(result.stdout.split())
    broken = [path for path in failed if path.split("/")[0].removesuffix(".py") in ours]
    if broken:
        raise BytecodeError(f"these modules do not compile: {', '.join(broken)}")
    return failed


def _version_of(python: Path) -> str:
    script = "import sys; print(f'{sys.version_info.major}.{sys.version_info.minor}')"
    result = subprocess.run(  # noqa: S603 - a named interpreter and a literal program
        [str(python), "-I", "-c", script], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() if result.returncode == 0 else "unknown"
