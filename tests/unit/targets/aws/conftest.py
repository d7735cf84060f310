"""The aws fakes' fixtures for every test here: moto in-process (mocked_aws), or a moto server (moto_srv, srv); and
every run's folder in a temporary one (04 records each node's image pull in runs/ beside env.yaml: a test that loads
the repository's env.yaml must never write into the checkout, nor read a recorded pull from it)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from tests.fakes.aws.fixtures import mocked_aws, moto_srv, srv  # noqa: E402,F401


@pytest.fixture(autouse=True)
def runs_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
