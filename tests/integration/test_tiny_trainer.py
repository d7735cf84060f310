"""05's thirty-line Ray Train example (``raytrain_helpers/worker/tiny_trainer.py``), run as the learner runs it:
``python -m raytrain_helpers.worker.tiny_trainer`` with ``RAY_ADDRESS`` set to the tutorial's local cluster (the
session's, so no second Ray starts): two CPU workers, each prints its loss at every step, and it exits 0."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration


def test_the_thirty_line_example_trains_on_two_workers(local_settings, local_cluster):
    env = dict(os.environ, RAY_ADDRESS=f"127.0.0.1:{local_settings.local.gcs_port}", RAY_DEDUP_LOGS="0")
    env.pop("RAY_TRAIN_V2_ENABLED", None)  # as a learner's shell has it: Ray's default
    done = subprocess.run(
        [sys.executable, "-m", "raytrain_helpers.worker.tiny_trainer"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    for rank in (0, 1):
        assert all(f"rank {rank} step {k} loss" in out for k in range(5)), out[-3000:]
