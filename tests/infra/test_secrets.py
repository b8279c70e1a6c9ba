"""Settings from SSM Parameter Store (moto) when a path is configured, the environment otherwise."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from mypy_boto3_ssm import SSMClient
from pydantic import ValidationError

from infra.secrets import ParametersNotFound, load_settings

PATH = "/handoff/prod"


@pytest.fixture
def ssm(monkeypatch: pytest.MonkeyPatch) -> Iterator[SSMClient]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    for name in ("DATABASE_URL", "SUPABASE_JWT_SECRET", "INNGEST_SIGNING_KEY", "MODEL"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        yield boto3.client("ssm")


def test_without_a_path_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, ssm: SSMClient
) -> None:
    ssm.put_parameter(Name=f"{PATH}/DATABASE_URL", Value="postgresql://ssm/db", Type="String")
    monkeypatch.delenv("SSM_PARAMETER_PATH", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql://env/db")
    assert load_settings().database_url == "postgresql://env/db"


def test_secure_strings_under_the_path_are_decrypted_into_settings(
    monkeypatch: pytest.MonkeyPatch, ssm: SSMClient
) -> None:
    # GIVEN the secrets as SecureStrings, a plain String, and the same name in the environment
    for name, value in {
        "DATABASE_URL": "postgresql://app:pw@db.supabase.co:6543/postgres",
        "SUPABASE_JWT_SECRET": "jwt-secret-from-ssm",
        "INNGEST_SIGNING_KEY": "signkey-prod-abc123",
        "INNGEST_EVENT_KEY": "event-key-from-ssm",
    }.items():
        ssm.put_parameter(Name=f"{PATH}/{name}", Value=value, Type="SecureString")
    ssm.put_parameter(Name=f"{PATH}/MODEL", Value="openai:gpt-4o-mini", Type="String")
    monkeypatch.setenv("SSM_PARAMETER_PATH", PATH)
    monkeypatch.setenv("DATABASE_URL", "postgresql://stale-env/db")
    monkeypatch.setenv("SCRIPTED_TOKEN_DELAY_MS", "7")

    # WHEN the settings are loaded
    settings = load_settings()

    # THEN the parameters are the source, and the environment fills in the rest
    assert settings.database_url == "postgresql://app:pw@db.supabase.co:6543/postgres"
    assert settings.supabase_jwt_secret is not None
    assert settings.supabase_jwt_secret.get_secret_value() == "jwt-secret-from-ssm"
    assert settings.inngest_signing_key is not None
    assert settings.inngest_signing_key.get_secret_value() == "signkey-prod-abc123"
    assert settings.model == "openai:gpt-4o-mini"
    assert settings.scripted_token_delay_ms == 7
    # Secrets never show in the settings' repr (and so in logs).
    assert "jwt-secret-from-ssm" not in repr(settings)


def test_every_page_is_read_and_other_names_are_ignored(
    monkeypatch: pytest.MonkeyPatch, ssm: SSMClient
) -> None:
    # SSM returns at most 10 parameters a page: 14 here, the one that matters among the last.
    for n in range(12):
        ssm.put_parameter(Name=f"{PATH}/A_UNRELATED_{n:02d}", Value="x", Type="String")
    ssm.put_parameter(Name=f"{PATH}/ZZ_UNKNOWN", Value="x", Type="String")
    ssm.put_parameter(
        Name=f"{PATH}/nested/DATABASE_URL", Value="postgresql://nested/db", Type="String"
    )
    ssm.put_parameter(Name=f"{PATH}/SUPABASE_JWT_SECRET", Value="late", Type="SecureString")
    monkeypatch.setenv("SSM_PARAMETER_PATH", PATH + "/")

    settings = load_settings()

    assert settings.supabase_jwt_secret is not None
    assert settings.supabase_jwt_secret.get_secret_value() == "late"
    # Only the path's own parameters count, not those of a deeper path.
    assert settings.database_url is None


def test_a_path_without_parameters_fails_at_start(
    monkeypatch: pytest.MonkeyPatch, ssm: SSMClient
) -> None:
    monkeypatch.setenv("SSM_PARAMETER_PATH", "/handoff/typo")
    with pytest.raises(ParametersNotFound, match="/handoff/typo/"):
        load_settings()


def test_a_path_must_be_absolute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSM_PARAMETER_PATH", "handoff/prod")
    with pytest.raises(ValidationError, match="ssm_parameter_path"):
        load_settings()
