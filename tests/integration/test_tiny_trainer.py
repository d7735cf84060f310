"""05's thirty-line Ray Train example (``raytrain_helpers/worker/tiny_trainer.py``), run as the learner runs it: the
commands of 05's fenced ``bash`` block, read from the notebook's text source and run in a shell that has none of
Ray's variables (a plain terminal with the environment active), against the tutorial's local cluster. Two CPU
workers each print their loss at every step, it exits 0, and no second Ray was started."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration

SOURCE = REPO / "notebooks" / "src" / "05_train.md"


def thirty_line_commands() -> str:
    """The shell block 05 gives for the thirty-line example (the fenced bash block that runs it)."""
    blocks = re.findall(r"^```bash\n(.*?)^```", SOURCE.read_text(), re.S | re.M)
    runs = [b for b in blocks if "raytrain_helpers.worker.tiny_trainer" in b]
    assert len(runs) == 1, runs
    return runs[0]


def plain_terminal(settings) -> dict[str, str]:
    """A terminal's environment: the virtual environment's bin first on PATH, none of Ray's variables; the test
    cluster's ports and folder as a learner's own settings would give them (RAYTRAIN_* variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = str(REPO)
    env["RAYTRAIN_GCS_PORT"] = str(settings.local.gcs_port)
    env["RAYTRAIN_DASHBOARD_PORT"] = str(settings.local.dashboard_port)
    env["RAYTRAIN_TEMP_ROOT"] = str(settings.local.temp_root)
    env["RAY_DEDUP_LOGS"] = "0"
    return env


def test_the_thirty_line_example_runs_as_05_words_it(local_settings, local_cluster):
    commands = thirty_line_commands()
    assert 'eval "$(raytrain-tutorial env)"' in commands
    done = subprocess.run(
        ["bash", "-e", "-c", commands],
        cwd=REPO,
        env=plain_terminal(local_settings),
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    for rank in (0, 1):
        assert all(f"rank {rank} step {k} loss" in out for k in range(5)), out[-3000:]
    assert "Started a local Ray instance" not in out, "ray.init() started a Ray of its own instead of joining"


def test_env_prints_the_address_and_the_token_file(local_settings, local_cluster):
    env = plain_terminal(local_settings)
    done = subprocess.run(["raytrain-tutorial", "env"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("export RAY_ADDRESS=127.0.0.1:") and f":{local_settings.local.gcs_port}" in line, line
    assert "RAY_AUTH_MODE=token" in line and "RAY_AUTH_TOKEN_PATH=" in line and line.endswith("auth_token"), line
