"""What a run records of its notebooks (``runs/<run>/progress.json``) and 06's verdict (``runs/<run>/verify.json``):
a real IPython shell's ``post_run_cell`` events, and the verdict of a criteria table."""

from __future__ import annotations

import pytest

from raytrain_helpers.core.config import load
from raytrain_helpers.core.criteria import Criteria
from raytrain_helpers.steps import progress


@pytest.fixture
def settings(tmp_path, monkeypatch, clean_env):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    return load(None, environ={}, check_installed_ray=False, run_name="ann")


def test_a_kernels_cells_and_its_last_failure_are_recorded(settings, tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        progress.notebook_started(settings, "03", shell=shell)
        shell.run_cell("x = 1")
        shell.run_cell("raise ValueError('no GPU here')")
        progress.notebook_started(settings, "04", shell=shell)  # the next notebook: the callback moves with it
        shell.run_cell("y = 2")
    finally:
        InteractiveShell.clear_instance()
    data = progress.read(tmp_path / "runs" / "ann" / progress.PROGRESS_FILE)
    assert data["last_notebook"] == "04" and data["notebooks"]["03"]["cells"] == 2
    assert data["notebooks"]["03"]["errors"] == 1 and data["notebooks"]["04"]["cells"] == 1
    assert data["last_failure"]["notebook"] == "03"
    assert data["last_failure"]["message"] == "ValueError: no GPU here"


def test_outside_a_kernel_nothing_is_recorded(settings, tmp_path):
    progress.notebook_started(settings, "01")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "rows, verdict",
    [
        ([("a", True), ("b", None)], "passed"),
        ([("a", True), ("b", False)], "failed"),
        ([("a", None)], "not applicable"),
    ],
)
def test_06s_verdict(settings, tmp_path, rows, verdict):
    crit = Criteria("t")
    for name, ok in rows:
        crit.add(name, ok, "evidence")
    data = progress.record_verdict(settings, crit, submission_id="raysubmit_1")
    assert progress.read(tmp_path / "runs" / "ann" / progress.VERDICT_FILE) == data
    assert data["verdict"] == verdict and data["failed"] == [n for n, ok in rows if ok is False]
    assert len(data["rows"]) == len(rows) and data["submission_id"] == "raysubmit_1"
