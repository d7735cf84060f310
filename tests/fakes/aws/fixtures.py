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


def share_api_models(mp: pytest.MonkeyPatch) -> None:
    """Every botocore session a test makes reads the API models through the product's one loader
    (``clients.aws.shared_loader``), so each model is parsed once per process: under ``mock_aws`` boto3 has no
    default session, so each ``boto3.client`` call of a test or of moto's seeding made a new one and parsed the EC2
    model (the largest) again - about 20 of the unit tests' CPU-seconds."""
    import botocore.session

    from raytrain_helpers.clients import aws

    own = botocore.session.create_loader
    mp.setattr(botocore.session, "create_loader", lambda path=None: own(path) if path else aws.shared_loader())


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
    share_api_models(monkeypatch)
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
    share_api_models(mp)
    with moto_server() as srv:
        yield srv
    mp.undo()


@pytest.fixture
def srv(moto_srv, monkeypatch):
    """A fresh account on the module's server for each test; fast polling."""
    eks_state = importlib.import_module("raytrain_helpers.targets.aws.eks.state")
    moto_srv.reset()
    moto_ext.seed_defaults()
    monkeypatch.setattr(eks_state, "POLL_S", 0.5)
    monkeypatch.delenv("FAKE_EKSCTL_FAIL", raising=False)
    yield moto_srv
    moto_srv.reset()
