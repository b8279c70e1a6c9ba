"""Settings with their secrets from SSM Parameter Store, read once per container.

On Lambda the database URL and the keys live in Parameter Store under `SSM_PARAMETER_PATH`, one
parameter per setting named like its environment variable (`/handoff/prod/DATABASE_URL`,
usually a SecureString), so no secret sits in the function's configuration. Without
`SSM_PARAMETER_PATH` every setting comes from the environment, as in development.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from infra.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient

logger = logging.getLogger(__name__)


class ParametersNotFound(RuntimeError):
    """SSM_PARAMETER_PATH names a path that holds no parameters."""


def load_settings() -> Settings:
    """The environment's settings, with the parameters under SSM_PARAMETER_PATH on top.

    Call it once per process (the Lambda entry modules do, at import): every call is a round
    trip to SSM. A parameter that names no setting is ignored with a warning.
    """
    settings = Settings()
    if not settings.ssm_parameter_path:
        return settings
    # boto3 costs a few hundred milliseconds to import: only a process that reads SSM pays it.
    import boto3

    client: SSMClient = boto3.client("ssm")
    parameters = read_parameters(client, settings.ssm_parameter_path)
    known = {name for name in Settings.model_fields if name != "ssm_parameter_path"}
    unknown = sorted(set(parameters) - known)
    if unknown:
        logger.warning("SSM parameters that name no setting", extra={"names": unknown})
    loaded = {name: value for name, value in parameters.items() if name in known}
    logger.info("settings read from SSM", extra={"names": sorted(loaded)})
    # Parameter Store outranks the environment: when a path is configured, it is the source.
    return Settings.model_validate(settings.model_dump() | loaded)


def read_parameters(client: SSMClient, path: str) -> dict[str, str]:
    """Every parameter directly under `path`, decrypted, keyed by lowercased last segment."""
    path = path.rstrip("/")
    prefix = path + "/"
    values: dict[str, str] = {}
    for page in client.get_paginator("get_parameters_by_path").paginate(
        Path=path, Recursive=False, WithDecryption=True
    ):
        for parameter in page["Parameters"]:
            values[parameter["Name"].removeprefix(prefix).lower()] = parameter["Value"]
    if not values:
        raise ParametersNotFound(f"no SSM parameters under {prefix!r}")
    return values
