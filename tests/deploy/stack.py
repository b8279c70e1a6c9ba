"""Build the artefacts, package serverless.yml with osls and read the generated template.

Everything runs offline: osls `package` compiles CloudFormation without calling AWS. It still
gets fake credentials and none of the caller's AWS settings, so no test can reach a real
account whatever the developer's shell holds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devkit.bytecode import BytecodeError, compiling_python
from devkit.lambda_package import PYTHON_VERSION, Artefact, build_artefacts
from devkit.packaged_assistants import assistants_code
from infra.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
STAGE = "ci"
REGION = "eu-central-1"
TEMPLATE = "cloudformation-template-update-stack.json"
# osls adds DependsOn entries that a GetAtt or Ref already implies; harmless, and not ours.
CFN_LINT_IGNORED = ("W3005",)


@dataclass(frozen=True)
class Deployment:
    artefacts: dict[str, Artefact]
    template: dict[str, Any]
    template_path: Path

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.template["Resources"]
        return resources

    def of_type(self, kind: str) -> dict[str, Any]:
        return {name: r for name, r in self.resources.items() if r["Type"] == kind}


def osls_command() -> list[str]:
    """osls from `npm ci --prefix .ci` (or PATH); skipped without it, except under CI."""
    local = ROOT / ".ci" / "node_modules" / ".bin" / "osls"
    osls = str(local) if local.is_file() else shutil.which("osls")
    node = shutil.which("node")
    if osls and node:
        return [node, osls]
    reason = "osls (npm) is not installed: npm ci --prefix .ci"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; .ci/run installs it")
    pytest.skip(reason)


def uv_binary() -> str:
    # `uv run` names itself in UV, also when `python3 -m pip install uv` left it off PATH.
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.fail("uv not found: run the tests with `python3 -m uv run pytest`")
    return uv


def lambda_python(uv: str) -> Path:
    """An interpreter of Lambda's Python version, to compile the zips' bytecode with; skipped
    without one, except under CI."""
    try:
        return compiling_python(PYTHON_VERSION, uv)
    except BytecodeError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (.ci/run installs it)")
        pytest.skip(str(exc))


def offline_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(ROOT)),
        # Never a real account: placeholder keys, no profile, no instance metadata.
        "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "offline-package-only",
        "AWS_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def deploy_offline(workdir: Path) -> Deployment:
    """`handoff package`, then `osls package` on a copy of serverless.yml beside the zips."""
    command = osls_command()
    service = workdir / "service"
    service.mkdir()
    shutil.copy(ROOT / "serverless.yml", service / "serverless.yml")
    # The assistants ASSISTANTS names, the demo's by default, as `handoff package` finds them.
    assistants = assistants_code(Settings())
    uv = uv_binary()
    artefacts = build_artefacts(
        ROOT, service / "dist", assistants, uv=uv, compile_with=lambda_python(uv)
    )
    template_path = osls_package(command, service, workdir / "package")
    return Deployment(
        artefacts={artefact.name: artefact for artefact in artefacts},
        template=json.loads(template_path.read_text()),
        template_path=template_path,
    )


def osls_package(
    command: list[str], service: Path, out: Path, params: tuple[str, ...] = ()
) -> Path:
    """The template `osls package` makes of the service (its zips in dist/), with `params`
    (`name=value`) given as `--param`."""
    result = subprocess.run(  # noqa: S603
        [
            *command,
            "package",
            "--stage",
            STAGE,
            "--region",
            REGION,
            "--package",
            str(out),
            *(f"--param={param}" for param in params),
        ],
        cwd=service,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out / TEMPLATE


def cfn_lint(template: Path) -> subprocess.CompletedProcess[str]:
    # cfn-lint ships no type information: run its console script rather than its API.
    executable = Path(sys.executable).with_name("cfn-lint")
    return subprocess.run(  # noqa: S603
        [
            str(executable),
            "--regions",
            REGION,
            "--ignore-checks",
            *CFN_LINT_IGNORED,
            "--",
            str(template),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def policy_statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in role["Properties"].get("Policies", []):
        statements.extend(policy["PolicyDocument"]["Statement"])
    return statements


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
