"""One offline deployment (both zips and the template) for every deploy test that reads it."""

from __future__ import annotations

import pytest

from tests.deploy.stack import Deployment, deploy_offline


@pytest.fixture(scope="package")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    return deploy_offline(tmp_path_factory.mktemp("deploy"))
