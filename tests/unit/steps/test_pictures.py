"""05 and 07's pictures from the learner's jobs, each written into the run's folder: on jobs recorded from real
local runs (tests/fixtures/pictures/profiled_job.json, tests/fixtures/jobs/cpu-2ranks-committed.log)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raytrain_helpers.clients.rayjobs import JobRun, parse_result
from raytrain_helpers.core import config
from raytrain_helpers.steps import pictures, train

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def settings(clean_env, repo_root, tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    return config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0, run_name="unit")


def _profiled() -> JobRun:
    d = json.loads((FIXTURES / "pictures" / "profiled_job.json").read_text())
    # the ranks came in rank 0's summary line of the job's log (no final checkpoint), as JobRun.metrics reads them
    result = dict(d["result"], metrics=d["metrics"])
    return JobRun("raytrain-tutorial-profile-x", "SUCCEEDED", result=result, config=d["config"])


def _committed() -> JobRun:
    logs = (FIXTURES / "jobs" / "cpu-2ranks-committed.log").read_text()
    return JobRun("raytrain-unit-b", "SUCCEEDED", logs=logs, result=parse_result(logs))


def test_the_profiled_step_is_drawn_into_the_profile_runs_folder(settings, tmp_path):
    pic = pictures.fsdp_step(settings, _profiled())
    assert pic.path == tmp_path / "tutorial-profile" / "fsdp_step.png"
    assert pic._repr_png_()[:4] == b"\x89PNG" and "2 ranks on gloo" in pic.figure.axes[0].get_title()


def test_a_failed_profiled_job_is_named_not_drawn(settings):
    job = _profiled()
    job.status = "FAILED"
    with pytest.raises(RuntimeError, match="did not finish \\(FAILED\\): see runs/tutorial-profile/job.log"):
        pictures.fsdp_step(settings, job)


def test_the_cluster_and_the_benchmark_loss_land_in_the_runs_folder(settings, tmp_path):
    job = _committed()
    assert pictures.cluster(settings, job).path.stat().st_size > 10_000
    pic = pictures.loss(settings, {"baseline": job}, measures="loss on random tokens", title="t", name="bench_loss")
    assert pic.path == tmp_path / "unit" / "bench_loss.png"
    assert list(pic.figure.axes[0].lines[0].get_xdata()) == list(range(1, 9))


def test_05s_loss_says_it_is_training_loss_and_when_nothing_can_be_learned():
    """The committed job trained on random tokens: the title says so, the y axis says what the number is."""
    fig = train.plot_loss(_committed())
    ax = fig.axes[0]
    assert "training loss, random tokens: nothing to learn" in ax.get_title()
    assert ax.get_ylabel() == "cross-entropy per token\n(mean over ranks)"
