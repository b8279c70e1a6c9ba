"""`handoff package`: both Lambda zips, built and described in a line each."""

from __future__ import annotations

import sys
from pathlib import Path

from devkit.cli import PROJECT_ROOT
from devkit.lambda_package import UNZIPPED_LIMIT_BYTES, Artefact, PackagingError, build_artefacts
from devkit.packaged_assistants import AssistantsNotPackable, assistants_code
from infra.settings import Settings


def package_lambdas(
    out: Path, uv: str, more_extras: tuple[str, ...], python: Path | None = None
) -> int:
    """Both zips, with the assistants ASSISTANTS names and the extras of their models'
    providers (and `more_extras`), compiled by `python`; 1, with one sentence, when they
    cannot be built."""
    try:
        assistants = assistants_code(Settings())
        extras = tuple(sorted({*assistants.extras, *more_extras}))
        print(f"with the assistants of {assistants.module} ({assistants.path})", flush=True)
        if extras:
            print(f"with the optional dependencies of: {', '.join(extras)}", flush=True)
        built = build_artefacts(
            PROJECT_ROOT, out, assistants, uv=uv, extras=extras, compile_with=python
        )
        for artefact in built:
            print(describe_artefact(artefact), flush=True)
            if artefact.uncompiled:
                skipped = ", ".join(artefact.uncompiled)
                print(f"  without bytecode (they do not compile): {skipped}", flush=True)
    except (AssistantsNotPackable, PackagingError) as exc:
        print(f"handoff package: {exc}", file=sys.stderr)
        return 1
    return 0


def describe_artefact(artefact: Artefact) -> str:
    mib = 2**20
    largest = ", ".join(f"{name} {size / mib:.1f}" for name, size in artefact.largest)
    return (
        f"{artefact.path}: {artefact.zipped_bytes / mib:.1f} MiB zipped, "
        f"{artefact.unzipped_bytes / mib:.1f} MiB unzipped "
        f"(Lambda allows {UNZIPPED_LIMIT_BYTES / mib:.0f}); largest (MiB): {largest}"
    )
