"""The Inngest client."""

from __future__ import annotations

import logging

import inngest
from pydantic import SecretStr

from infra.settings import Settings


def create_inngest_client(settings: Settings) -> inngest.Inngest:
    """Dev server when INNGEST_DEV is set; otherwise signed production mode, against Inngest
    Cloud or the server at INNGEST_BASE_URL (self-hosted, or the local executor)."""
    origin = settings.inngest_origin
    dev = settings.inngest_is_dev_server
    return inngest.Inngest(
        app_id=settings.inngest_app_id,
        is_production=not dev,
        api_base_url=origin,
        event_api_base_url=origin,
        event_key=_secret(settings.inngest_event_key),
        signing_key=None if dev else _secret(settings.inngest_signing_key),
        logger=logging.getLogger("inngest"),
    )


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()
