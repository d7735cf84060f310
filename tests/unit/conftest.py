"""Every unit test keeps its runs' records (``runs/``) in a temporary folder: steps write there (04 records each
node's image pull, 01 its placement, 05 its job), and a test that loads the repository's env.yaml must never write
into the checkout, nor read what an earlier test or a real run left there. A test that means ``runs/`` beside
env.yaml removes the variable itself."""

import pytest


@pytest.fixture(autouse=True)
def runs_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
