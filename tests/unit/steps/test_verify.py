"""06_verify's criteria on recorded runs: each broken variant must fail the right criterion."""

import copy
import math

import pytest

from raytrain_helpers.clients.rayjobs import JobRun
from raytrain_helpers.core import config
from raytrain_helpers.plan.memory import plan_for
from raytrain_helpers.steps import verify

HEAD, W0, W1 = "h" * 56, "a" * 56, "b" * 56


def _rank(r, node, state_bytes):
    return dict(
        rank=r,
        node_id=node,
        host="vm",
        pid=100 + r,
        device="cpu",
        steps_run=4,
        mean_step_time_s=0.05,
        tokens_per_s=5000.0,
        peak_mem_bytes=600 << 20,
        state_bytes=dict(total=state_bytes),
        loss_finite=True,
    )


@pytest.fixture
def settings(clean_env, repo_root):
    return config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0, steps=4)


@pytest.fixture
def good_run(settings):
    plan = plan_for(settings, 2, on_gpu=False)
    sb = int(plan.state_per_device_gib * 1024**3)
    metrics = dict(
        step=4, steps=4, world_size=2, losses=[6.9, 6.9, 6.8, 6.8], ranks=[_rank(0, W0, sb), _rank(1, W1, sb)]
    )
    nodes = [
        dict(node_id=HEAD, is_head=True, alive=True),
        dict(node_id=W0, is_head=False, alive=True),
        dict(node_id=W1, is_head=False, alive=True),
    ]
    logs = "[train] SUCCESS rank=0/2\n[train] SUCCESS rank=1/2\n"
    return JobRun(
        "raytrain-x",
        "SUCCEEDED",
        logs=logs,
        result=dict(ok=True, metrics=metrics, nodes=nodes, checkpoint=None),
        config={},
    )


def _status(v, name):
    return next(c.status for c in v.criteria.items if c.name.startswith(name))


def test_good_run_passes(settings, good_run, monkeypatch):
    monkeypatch.setattr(verify, "live_status", lambda *a: None)
    v = verify.verify(settings, good_run, check_restore=False)
    assert v.ok, v.criteria.to_json()
    assert _status(v, "NCCL transport") == "n/a"
    assert _status(v, "GPUs allocatable") == "n/a"


@pytest.mark.parametrize(
    "breakage, criterion",
    [
        (lambda r: r.metrics["ranks"][1].update(node_id=HEAD), "workers spread"),
        (lambda r: r.metrics["ranks"][1].update(node_id=W0), "workers spread"),
        (lambda r: setattr(r, "logs", "[train] SUCCESS rank=0/2\n"), "every rank reported SUCCESS"),
        (lambda r: r.metrics["losses"].__setitem__(2, math.nan), "loss finite"),
        (lambda r: setattr(r, "status", "FAILED"), "job SUCCEEDED"),
        (lambda r: r.metrics["ranks"][0]["state_bytes"].update(total=10**9), "measured memory"),
        (lambda r: r.result.update(nodes=[]), "workers spread"),
    ],
)
def test_broken_runs_fail_the_right_criterion(settings, good_run, monkeypatch, breakage, criterion):
    monkeypatch.setattr(verify, "live_status", lambda *a: None)
    run = copy.deepcopy(good_run)
    breakage(run)
    v = verify.verify(settings, run, check_restore=False)
    assert not v.ok
    assert _status(v, criterion) == "FAIL", v.criteria.to_json()
    with pytest.raises(AssertionError, match=criterion.split()[0]):
        v.raise_if_failed()


def test_no_recorded_job_fails(settings, tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    v = verify.verify(settings, run_name="never-ran")
    assert not v.ok and "run 05_train first" in v.criteria.items[0].evidence


def test_gpu_run_without_audit_fails_transport(settings, good_run, monkeypatch):
    monkeypatch.setattr(verify, "live_status", lambda *a: None)
    run = copy.deepcopy(good_run)
    for r in run.metrics["ranks"]:
        r["device"] = "cuda:0"
    v = verify.verify(settings, run, check_restore=False)
    assert _status(v, "NCCL transport") == "FAIL"
