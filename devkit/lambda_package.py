"""`handoff package`: the two Lambda zip artefacts that serverless.yml deploys.

Each artefact is the locked runtime dependencies, installed as Lambda's python3.12 on x86_64
needs them (manylinux wheels, whatever this machine is), plus the project's packages, every
module with its bytecode for that Python (devkit/bytecode.py). The zips are byte-for-byte
reproducible, so an unchanged function keeps its CodeSha256 and a deploy does not replace it.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from devkit.bytecode import BytecodeError, compile_tree, compiling_python
from devkit.import_closure import missing_from, third_party_imports
from devkit.packaged_assistants import AssistantsCode

# What both artefacts carry of ours; each adds its own shell and the assistants' code (demo/
# for the default ASSISTANTS), and devkit/ is in neither.
CORE_PACKAGES = ("agent", "turns", "infra")
PYTHON_VERSION = "3.12"
# Lambda's python3.12 runs on Amazon Linux 2023, whose glibc is 2.34.
PYTHON_PLATFORM = "x86_64-manylinux_2_34"
# Lambda's limit on a function's unzipped code, layers included.
UNZIPPED_LIMIT_BYTES = 250 * 1024 * 1024
RUN_SCRIPT = "handlers/run.sh"
# 1980-01-01, the earliest time a zip entry can hold: no build time leaks into the bytes.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
# A runtime dependency that only the dev stack and the tests use: the Lambdas talk to Supabase
# Postgres directly and verify tokens with PyJWT. (The `dev` group, embedded Postgres included,
# is never exported.)
DEV_ONLY = ("supabase",)
# What Lambda's Python runtime provides itself, and an artefact need not carry: SnapStart's
# hook registry (functions/lambda_inngest.py).
RUNTIME_PROVIDED = frozenset({"snapshot_restore_py"})


@dataclass(frozen=True)
class ArtefactSpec:
    name: str
    entry_module: str
    shell: str  # handlers or functions: the other one is not in the artefact
    # Left out with every dependency only they need (`uv export --prune`).
    prune: tuple[str, ...]

    @property
    def packages(self) -> tuple[str, ...]:
        return (*CORE_PACKAGES, self.shell)


ARTEFACTS = (
    # uvicorn serves the app behind the Lambda Web Adapter; Mangum would buffer the stream.
    ArtefactSpec("respond", "handlers.lambda_respond", "handlers", (*DEV_ONLY, "mangum")),
    # Mangum adapts the Lambda event; there is no server process.
    ArtefactSpec("inngest", "functions.lambda_inngest", "functions", (*DEV_ONLY, "uvicorn")),
)


class PackagingError(Exception):
    """An artefact could not be built, or would not run on Lambda."""


@dataclass(frozen=True)
class Artefact:
    name: str
    path: Path
    zipped_bytes: int
    unzipped_bytes: int
    # The largest top-level entries of the zip, biggest first.
    largest: tuple[tuple[str, int], ...]
    # The dependencies' files that do not compile (none import them), without bytecode.
    uncompiled: tuple[str, ...] = ()


def build_artefacts(
    root: Path,
    out: Path,
    assistants: AssistantsCode,
    *,
    uv: str = "uv",
    specs: tuple[ArtefactSpec, ...] = ARTEFACTS,
    python_version: str = PYTHON_VERSION,
    extras: tuple[str, ...] = (),
    compile_with: Path | None = None,
) -> list[Artefact]:
    """Build `out/<name>.zip` for each spec from the project at `root` and its uv.lock, with
    the assistants' code and the optional dependencies of `extras` (a model provider's
    package, say), compiled by `compile_with` (default: found, see `compiling_python`).

    `python_version` other than Lambda's is for tests that run an artefact on this machine.
    """
    try:
        python = compiling_python(python_version, uv, compile_with)
    except BytecodeError as exc:
        raise PackagingError(str(exc)) from exc
    out.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="handoff-package-") as scratch,
        # uv and zlib release the GIL: the artefacts build side by side.
        ThreadPoolExecutor(max_workers=len(specs)) as pool,
    ):
        builds = [
            pool.submit(
                build_artefact,
                root,
                out,
                Path(scratch),
                spec,
                assistants,
                python,
                uv=uv,
                python_version=python_version,
                extras=extras,
            )
            for spec in specs
        ]
        return [build.result() for build in builds]


def build_artefact(
    root: Path,
    out: Path,
    scratch: Path,
    spec: ArtefactSpec,
    assistants: AssistantsCode,
    python: Path,
    *,
    uv: str = "uv",
    python_version: str = PYTHON_VERSION,
    extras: tuple[str, ...] = (),
) -> Artefact:
    staging = scratch / spec.name
    requirements = scratch / f"{spec.name}-requirements.txt"
    flags = _export_flags(spec, extras)
    _run([uv, "export", *flags, "--output-file", str(requirements)], root)
    _run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--target",
            str(staging),
            "--python-platform",
            PYTHON_PLATFORM,
            "--python-version",
            python_version,
            # A source build would compile for this machine, not for Lambda.
            "--only-binary",
            ":all:",
            # The export is the whole locked set: install exactly it, resolve nothing.
            "--no-deps",
            "--requirements",
            str(requirements),
        ],
        root,
    )
    sources = {package: root / package for package in spec.packages}
    sources[assistants.top] = assistants.path
    for source in sources.values():
        _copy_source(source, staging / source.name)
    # A package of ours left out of the artefact counts as missing too.
    check_imports(spec.name, staging, sources, (spec.entry_module, assistants.module))
    _remove_bytecode(staging)
    try:
        uncompiled = compile_tree(staging, python, tuple(sources))
    except BytecodeError as exc:
        raise PackagingError(f"{spec.name}: {exc}") from exc
    unzipped = _tree_bytes(staging)
    if unzipped >= UNZIPPED_LIMIT_BYTES:
        raise PackagingError(
            f"{spec.name}: {unzipped / 2**20:.0f} MiB unzipped, over Lambda's 250 MB limit"
        )
    path = out / f"{spec.name}.zip"
    _write_zip(staging, path)
    return Artefact(
        name=spec.name,
        path=path,
        zipped_bytes=path.stat().st_size,
        unzipped_bytes=unzipped,
        largest=_largest_entries(staging),
        uncompiled=uncompiled,
    )


def _export_flags(spec: ArtefactSpec, extras: tuple[str, ...]) -> list[str]:
    flags = ["--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "--quiet"]
    for extra in extras:
        flags += ["--extra", extra]
    for package in spec.prune:
        flags += ["--prune", package]
    return flags


def _copy_source(source: Path, target: Path) -> None:
    if source.is_file():  # an assistants' module of one file
        shutil.copy(source, target)
        return
    shutil.copytree(
        source,
        target,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        dirs_exist_ok=True,
    )


def check_imports(
    artefact: str, site: Path, sources: Mapping[str, Path], entries: Sequence[str]
) -> None:
    """Unless `site` holds every third-party module that importing `entries` runs (from
    `sources`, our packages and the assistants' code), PackagingError, naming each one left
    out and the modules that import it."""
    needed = {
        name: importers
        for name, importers in third_party_imports(sources, entries).items()
        if name not in RUNTIME_PROVIDED
    }
    missing = missing_from(site, set(needed))
    if missing:
        what = "; ".join(
            f"{name} (imported by {', '.join(sorted(needed[name]))})" for name in missing
        )
        raise PackagingError(
            f"{artefact}: the artefact leaves out {what}. A package the assistants import must"
            " be a dependency of this project (`uv add <distribution>`); if Handoff's own"
            f" code imports it, ARTEFACTS ({__name__}) leaves it out by mistake."
        )


def _remove_bytecode(staging: Path) -> None:
    # What the install compiled, if anything, was compiled for this machine's paths and
    # checked by timestamp: all of it is made again, alike.
    for cache in sorted(staging.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache)


def _files(tree: Path) -> Iterator[Path]:
    return (path for path in sorted(tree.rglob("*")) if path.is_file())


def _tree_bytes(tree: Path) -> int:
    return sum(path.stat().st_size for path in _files(tree))


def _largest_entries(staging: Path, count: int = 8) -> tuple[tuple[str, int], ...]:
    sizes: dict[str, int] = {}
    for path in _files(staging):
        top = path.relative_to(staging).parts[0]
        sizes[top] = sizes.get(top, 0) + path.stat().st_size
    ranked = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))
    return tuple(ranked[:count])


def _write_zip(staging: Path, path: Path) -> None:
    partial = path.with_suffix(".zip.partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for file in _files(staging):
            name = file.relative_to(staging).as_posix()
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | _mode(name, file)) << 16
            info.create_system = 3  # Unix, so Lambda honours the permission bits
            with file.open("rb") as source, archive.open(info, "w") as target:
                shutil.copyfileobj(source, target, 1 << 20)
    partial.replace(path)


def _mode(name: str, file: Path) -> int:
    # Lambda execs run.sh directly: it must be executable even from a checkout that lost
    # the bit (a Windows clone, a zip download of the repository).
    if name == RUN_SCRIPT or file.stat().st_mode & stat.S_IXUSR:
        return 0o755
    return 0o644


def _run(command: list[str], cwd: Path) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)  # noqa: S603
    if result.returncode != 0:
        raise PackagingError(f"{' '.join(command[:3])} failed:\n{result.stderr.strip()}")
