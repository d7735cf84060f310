"""04 records each GPU node's image pull time in the run's folder (runs/ beside env.yaml): these tests load the
repository's env.yaml, so their runs go to a temporary folder, never into the checkout."""

import pytest


@pytest.fixture(autouse=True)
def _runs_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
