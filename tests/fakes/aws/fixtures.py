"""pytest fixtures for the aws target's tests (import them into a test module:
``from tests.fakes.aws.fixtures import mocked_aws, moto_srv, srv``)."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from . import moto_ext
from .moto_env import FAKE_ACCESS_KEY, FAKE_SECRET_KEY, FAKE_SESSION_TOKEN, moto_server

REPO = Path(__file__).resolve().parents[3]
SECRETS = (FAKE_ACCESS_KEY, FAKE_SECRET_KEY, FAKE_SESSION_TOKEN)

_AWS_VARS = (
    "AWS_ENDPOINT_URL",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_REGION",
    "RAYTRAIN_RUNS_DIR",
)


def make_settings(tmp_path: Path, **params):
    """Settings from a copy of the repository's env.yaml in tmp_path (runs/ then lands in tmp_path)."""
    import raytrain_helpers as rt

    env = tmp_path / "env.yaml"
    if not env.exists():
        shutil.copy(REPO / "env.yaml", env)
    params.setdefault("target", "aws")
    return rt.load(env, **params)


@pytest.fixture
def mocked_aws(monkeypatch, tmp_path):
    """moto's in-process mock (``mock_aws``) plus moto_ext, seeded like a plausible account."""
    from moto import mock_aws

    for k in _AWS_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", FAKE_SESSION_TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    moto_ext.install()
    moto_ext.FAKE.reset()
    with mock_aws():
        moto_ext.seed_defaults()
        yield moto_ext.FAKE
    moto_ext.FAKE.reset()


@pytest.fixture(scope="module")
def moto_srv():
    """A ThreadedMotoServer for the module (eksctl runs as a subprocess and needs HTTP)."""
    mp = pytest.MonkeyPatch()
    for k in _AWS_VARS:
        mp.delenv(k, raising=False)
    with moto_server() as srv:
        yield srv
    mp.undo()


@pytest.fixture
def srv(moto_srv, monkeypatch):
    """A fresh account on the module's server for each test; fast polling."""
    aws_cluster = importlib.import_module("raytrain_helpers.targets.aws.eks")
    moto_srv.reset()
    moto_ext.seed_defaults()
    monkeypatch.setattr(aws_cluster, "POLL_S", 0.5)
    monkeypatch.delenv("FAKE_EKSCTL_FAIL", raising=False)
    yield moto_srv
    moto_srv.reset()
