"""The zips carry bytecode for Lambda's Python, and a cold start of them compiles nothing.

Lambda's task root is read-only: a module without bytecode in the zip is compiled from source
at every cold start that SnapStart does not restore. These read the zips `handoff package`
builds for python3.12 (tests/deploy/conftest.py) and run the respond one with a 3.12
interpreter that sees nothing but the artefact.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from devkit.lambda_package import PYTHON_VERSION
from tests.deploy.stack import Deployment, lambda_python, uv_binary

# A pyc's flags word (PEP 552): hash-based (bit 0), source not checked (bit 1 clear).
# The first test here may build the package's deployment (conftest.py), minutes beside other
# workers on a slow machine.
pytestmark = pytest.mark.timeout(360)
UNCHECKED_HASH = 0b01
CACHE_TAG = "cpython-" + PYTHON_VERSION.replace(".", "")
# What the entry needs to start; nothing reaches the database or Inngest.
ENTRY_ENV = {
    "DATABASE_URL": "postgresql://handoff@127.0.0.1:9/handoff",
    "SUPABASE_JWT_SECRET": "placeholder-" + "x" * 32,
    "INNGEST_EVENT_KEY": "placeholder",
    "INNGEST_SIGNING_KEY": "signkey-prod-" + "0" * 64,
}
# Imports the module named in argv[1] and prints, as JSON, every source file the import
# system compiled (a module whose bytecode was missing, stale or of another version) and how
# many modules came from the task root. `-S -E -B`: no site-packages, no PYTHON* variables, no
# bytecode written, as on Lambda's read-only task root.
IMPORT_RECORDING_COMPILES = """
import importlib, json, os, sys
import _frozen_importlib_external as external
compiled = []
source_to_code = external.SourceLoader.source_to_code
def recording(self, data, path, *args, **kwargs):
    compiled.append(os.path.relpath(path))
    return source_to_code(self, data, path, *args, **kwargs)
external.SourceLoader.source_to_code = recording
importlib.import_module(sys.argv[1])
task = os.getcwd() + os.sep
files = [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
print(json.dumps({"compiled": compiled, "loaded": sum(f.startswith(task) for f in files)}))
"""


@pytest.mark.parametrize("name", ["respond", "inngest"])
def test_each_artefact_carries_unchecked_bytecode_for_lambdas_python_beside_every_module(
    deployment: Deployment, name: str
) -> None:
    # GIVEN an artefact as `handoff package` builds it for Lambda's python3.12
    artefact = deployment.artefacts[name]
    with zipfile.ZipFile(artefact.path) as archive:
        headers = {n: archive.open(n).read(16) for n in archive.namelist() if n.endswith(".pyc")}
        sources = [n for n in archive.namelist() if n.endswith(".py")]
    # THEN every module has its bytecode where a 3.12 interpreter looks for it, and only
    # bytecode of that version is there
    assert len(sources) > 1000
    expected = {
        (Path(n).parent / "__pycache__" / f"{Path(n).stem}.{CACHE_TAG}.pyc").as_posix()
        for n in sources
    }
    assert artefact.uncompiled == ()
    assert set(headers) == expected
    # AND none is checked against its source's timestamp, which the zip fixes at 1980
    flags = {int.from_bytes(header[4:8], "little") for header in headers.values()}
    assert flags == {UNCHECKED_HASH}
    assert len({header[:4] for header in headers.values()}) == 1  # one magic: one version


def import_in_task(task: Path, module: str) -> dict[str, object]:
    python = lambda_python(uv_binary())
    result = subprocess.run(  # noqa: S603 - Lambda's interpreter and a literal program
        [str(python), "-S", "-E", "-B", "-c", IMPORT_RECORDING_COMPILES, module],
        cwd=task,
        env=ENTRY_ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    recorded: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return recorded


def test_the_respond_entry_imports_from_the_unzipped_artefact_without_compiling_a_module(
    deployment: Deployment, tmp_path: Path
) -> None:
    # GIVEN the respond artefact unzipped (every file with this moment's timestamp), and a
    # module added beside it that has no bytecode
    task = tmp_path / "task"
    with zipfile.ZipFile(deployment.artefacts["respond"].path) as archive:
        archive.extractall(task)
    (task / "added_later.py").write_text("import handlers.lambda_respond\n")
    # WHEN Lambda's Python imports the entry through that module
    recorded = import_in_task(task, "added_later")
    # THEN the one module without bytecode is the only one compiled, of hundreds imported
    assert recorded["compiled"] == ["added_later.py"]
    assert isinstance(recorded["loaded"], int)
    assert recorded["loaded"] > 300
