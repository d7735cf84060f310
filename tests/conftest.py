"""Shared fixtures. The local Ray cluster of the integration tests uses its own ports and temp root,
so it never touches a cluster a person started with the env.yaml defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TEST_LOCAL = dict(gcs_port=6397, dashboard_port=8277, temp_root="/tmp/raytrain-test")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def kuberay_crds_dir() -> Path:
    d = SHARED / "kuberay-crds"
    if not d.is_dir():
        pytest.skip(
            f"KubeRay CRDs not found at {d}: the shared/ folder beside the repository is absent "
            f"(CI and the dev sessions have it; a bare clone does not)"
        )
    return d


@pytest.fixture
def clean_env(monkeypatch):
    """No RAYTRAIN_* variables from the caller's shell leak into a test."""
    for k in list(os.environ):
        if k.startswith("RAYTRAIN_"):
            monkeypatch.delenv(k, raising=False)
    return monkeypatch


@pytest.fixture(scope="session")
def test_runs_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="session")
def local_settings(test_runs_dir):
    import raytrain_helpers as rt

    os.environ["RAYTRAIN_RUNS_DIR"] = str(test_runs_dir)
    return rt.load(REPO / "env.yaml", environ={}, **TEST_LOCAL)


@pytest.fixture(scope="session")
def local_cluster(local_settings):
    """A real local Ray cluster: head + 2 worker raylets, stopped (and checked gone) at the end."""
    from raytrain_helpers.targets import local

    info = local.up(local_settings)
    yield info
    local.down(local_settings)
    assert not local._our_pids(local_settings), "the test cluster left processes behind"
