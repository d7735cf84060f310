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
        step=4,
        steps=4,
        world_size=2,
        losses=[6.9, 6.9, 6.8, 6.8],
        ranks=[_rank(0, W0, sb), _rank(1, W1, sb)],
        data="learnable",
        evals=[(0, 6.9), (2, 6.2), (4, 5.8)],
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
    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    v = verify.verify(settings, good_run, check_restore=False, check_model=False)
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
    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    run = copy.deepcopy(good_run)
    breakage(run)
    v = verify.verify(settings, run, check_restore=False, check_model=False)
    assert not v.ok
    assert _status(v, criterion) == "FAIL", v.criteria.to_json()
    with pytest.raises(AssertionError, match=criterion.split()[0]):
        v.raise_if_failed()


def test_no_recorded_job_fails(settings, tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    v = verify.verify(settings, run_name="never-ran")
    assert not v.ok and "run 05_train first" in v.criteria.items[0].evidence


def test_gpu_run_without_audit_fails_transport(settings, good_run, monkeypatch):
    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    run = copy.deepcopy(good_run)
    for r in run.metrics["ranks"]:
        r["device"] = "cuda:0"
    v = verify.verify(settings, run, check_restore=False, check_model=False)
    assert _status(v, "NCCL transport") == "FAIL"


def _gpu(run, peak_bytes):
    for r in run.metrics["ranks"]:
        r["device"], r["peak_mem_bytes"] = "cuda:0", peak_bytes


def test_one_worker_node_alive_fails_placement_and_nodes(settings, good_run, monkeypatch):
    """The settings ask for 2 worker nodes: both ranks on the one node still alive is not "spread"."""
    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    run = copy.deepcopy(good_run)
    run.metrics["ranks"][1]["node_id"] = W0
    run.result["nodes"] = [n for n in run.result["nodes"] if n["node_id"] != W1]
    v = verify.verify(settings, run, check_restore=False, check_model=False)
    assert _status(v, "workers spread over >= 2 worker nodes") == "FAIL", v.criteria.to_json()
    assert _status(v, "head up, worker nodes running") == "FAIL"


def test_one_rank_needs_one_node_only(settings, good_run, monkeypatch):
    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    run = copy.deepcopy(good_run)
    run.metrics.update(world_size=1, ranks=run.metrics["ranks"][:1])
    run.logs = "[train] SUCCESS rank=0/1\n"
    v = verify.verify(config.with_overrides(settings, num_workers=1), run, check_restore=False, check_model=False)
    assert _status(v, "workers spread over >= 1 worker nodes") == "PASS", v.criteria.to_json()


def test_dead_worker_node_is_named(settings, good_run, monkeypatch):
    monkeypatch.setattr(verify, "live_status", lambda *a: "FAILED")
    run = copy.deepcopy(good_run)
    run.status = "FAILED"
    run.result.update(ok=False, error="TrainingFailedError: a worker died")
    run.result["nodes"][2].update(alive=False, host="vm-2")
    v = verify.verify(settings, run, check_restore=False, check_model=False)
    job = next(c for c in v.criteria.items if c.name == "job SUCCEEDED")
    assert job.status == "FAIL" and f"died during the run: {W1[:12]} (vm-2)" in job.evidence
    nodes = next(c for c in v.criteria.items if c.name == "head up, worker nodes running")
    assert nodes.status == "FAIL" and f"dead: {W1[:12]} (vm-2)" in nodes.evidence


@pytest.mark.parametrize(
    "fixture, expect, ok",
    [("h200x2-raytrain-train-p2p.log", "p2p", True), ("synthetic-efa-2x4-healthy.log", "efa", False)],
)
def test_audit_world_must_be_the_jobs(settings, good_run, monkeypatch, repo_root, fixture, expect, ok):
    """A healthy 8-rank NCCL log passes its own audit, but is not the 2-rank job's: the row fails."""
    from raytrain_helpers import nccl

    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    run = copy.deepcopy(good_run)
    _gpu(run, 1 << 30)
    audit = nccl.audit((repo_root / "tests" / "fixtures" / "nccl" / fixture).read_text(), expect=expect)
    assert audit.ok
    v = verify.verify(settings, run, check_restore=False, audit=audit, check_model=False)
    assert _status(v, "NCCL transport") == "PASS"
    assert _status(v, "NCCL audit covers the job's 2 ranks") == ("PASS" if ok else "FAIL"), v.criteria.to_json()


@pytest.mark.parametrize(
    "peak_gib, state_scale, ok",
    [(None, 1.0, True), (64, 1.0, False), (None, 0.2, False), (None, 1.5, False)],
)
def test_gpu_memory_against_the_plan(settings, good_run, monkeypatch, peak_gib, state_scale, ok):
    """On GPUs the peak is compared with the plan's peak (25 % + 1 GiB slack), the sharded state with the plan's."""
    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    run = copy.deepcopy(good_run)
    plan = plan_for(settings, 2, on_gpu=True)
    _gpu(run, int((peak_gib if peak_gib is not None else plan.peak_per_device_gib) * 1024**3))
    for r in run.metrics["ranks"]:
        r["state_bytes"]["total"] = int(plan.state_per_device_gib * 1024**3 * state_scale)
    v = verify.verify(settings, run, check_restore=False, check_model=False)
    row = next(c for c in v.criteria.items if c.name == "measured memory vs the plan")
    assert row.status == ("PASS" if ok else "FAIL"), row.evidence
    assert "GPU peak" in row.evidence


def test_live_status_unavailable_fails_with_the_reason(settings, good_run, monkeypatch):
    def unreachable(*a):
        raise verify.JobStatusError("cannot read the status of raytrain-x: ConnectionError: refused")

    monkeypatch.setattr(verify, "live_status", unreachable)
    v = verify.verify(settings, copy.deepcopy(good_run), check_restore=False, check_model=False)
    job = next(c for c in v.criteria.items if c.name == "job SUCCEEDED")
    assert job.status == "FAIL" and "ConnectionError: refused" in job.evidence


def test_live_status_of_a_stopped_cluster_raises_a_named_error(clean_env, repo_root, tmp_path):
    from raytrain_helpers.clients.rayjobs import JobStatusError
    from raytrain_helpers.steps import train

    s = config.load(repo_root / "env.yaml", environ={}, gcs_port=6499, dashboard_port=8399, temp_root="/tmp/rt-none")
    with pytest.raises(JobStatusError, match="raytrain-x.*not running"):
        train.live_status(s, "raytrain-x")


def _marker(rank, pid):
    return f"(RayTrainWorker pid={pid}) [raytrain] marker=m1 rank={rank}/2 node={W0} host=vm pid={pid}\n"


def _step(k, n, pid):
    return f"(RayTrainWorker pid={pid}) [train] step {k}/{n} loss=6.9 step_time=0.05s tokens/s=5000 peak_mem=5MiB\n"


def test_restart_after_a_failure_is_reported_with_every_step(settings, good_run, monkeypatch):
    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    run = copy.deepcopy(good_run)
    first = _marker(0, 11) + _marker(1, 12) + "".join(_step(k, 4, 11) for k in (1, 2, 3))
    second = _marker(0, 21) + "(RayTrainWorker pid=21) [train] resumed from checkpoint at step 2 (/x)\n"
    second += "".join(_step(k, 4, 21) for k in (3, 4))
    run.logs += first + first + second  # Ray prints some lines twice
    v = verify.verify(settings, run, check_restore=False, check_model=False)
    row = next(c for c in v.criteria.items if c.name == "every step trained, failures recovered")
    assert row.status == "PASS" and row.evidence == "resumed after 1 failure from step 2; steps 1-4 of 4 trained"

    lost = copy.deepcopy(good_run)
    lost.logs += first + second.replace("at step 2", "at step 3").replace(_step(3, 4, 21), "")
    lost.logs = lost.logs.replace(_step(3, 4, 11), "")
    v = verify.verify(settings, lost, check_restore=False, check_model=False)
    row = next(c for c in v.criteria.items if c.name == "every step trained, failures recovered")
    assert row.status == "FAIL" and "missing 3" in row.evidence, row.evidence


def test_no_failure_and_resume_from_an_earlier_job(settings, good_run, monkeypatch):
    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    run = copy.deepcopy(good_run)
    run.logs += _marker(0, 11) + "(RayTrainWorker pid=11) [train] resumed from checkpoint at step 2 (/x)\n"
    run.logs += _step(3, 4, 11) + _step(4, 4, 11)
    v = verify.verify(settings, run, check_restore=False, check_model=False)
    row = next(c for c in v.criteria.items if c.name == "every step trained, failures recovered")
    assert row.status == "PASS", row.evidence
    assert row.evidence == "no worker failure, resumed from step 2 (an earlier job); steps 3-4 of 4 trained"


def test_the_exported_model_is_a_row_of_the_criteria_table(settings, good_run, monkeypatch, tmp_path):
    """06's table carries the completion row: an export that never trained (the initial weights) fails it, with
    its generations kept for section 5's table; without an export recorded, the row fails and says so."""
    torch = pytest.importorskip("torch")
    from raytrain_helpers.worker import model as model_mod
    from tests.helpers import SMALL_MODEL, job_cfg

    monkeypatch.setattr(verify, "live_status", lambda *a: "SUCCEEDED")
    name = "trained model completes held-out prompts"
    v = verify.verify(settings, copy.deepcopy(good_run), check_restore=False)
    assert _status(v, name) == "FAIL" and not v.ok and v.generations["rows"] == []
    torch.manual_seed(0)
    model = model_mod.build_random(SMALL_MODEL, "cpu")
    model_mod.write_hf_folder(model.state_dict(), model.config, str(tmp_path / "model"), model_dir=None, meta={})
    run = copy.deepcopy(good_run)
    run.config = job_cfg(model=SMALL_MODEL, seed=0, data="learnable", export_path=str(tmp_path / "model")).to_dict()
    v = verify.verify(settings, run, check_restore=False)
    row = next(c for c in v.criteria.items if c.name.startswith(name))
    assert row.status == "FAIL" and "/20 exactly right" in row.evidence and len(v.generations["rows"]) == 20
    names = [c.name for c in v.criteria.items]
    assert names.index(row.name) == names.index("the model learned (held-out eval loss >= 5 % lower)") + 1


def test_a_cluster_started_after_the_job_leaves_the_record_to_say(settings, good_run, monkeypatch):
    """After the main command (08 stopped the cluster, 02 started a new one), 06 verifies the recorded job: the new
    cluster answers but does not know it, which is not a failure; an unreachable cluster still is."""

    def unknown(*a):
        raise verify.JobUnknownError(
            "cannot read the status of raytrain-x: RuntimeError: Job raytrain-x does not exist"
        )

    monkeypatch.setattr(verify, "live_status", unknown)
    v = verify.verify(settings, copy.deepcopy(good_run), check_restore=False, check_model=False)
    job = next(c for c in v.criteria.items if c.name == "job SUCCEEDED")
    assert job.status == "PASS" and "started after it and does not know it" in job.evidence, job.evidence
    failed = copy.deepcopy(good_run)
    failed.status = "FAILED"
    v = verify.verify(settings, failed, check_restore=False, check_model=False)
    assert next(c for c in v.criteria.items if c.name == "job SUCCEEDED").status == "FAIL"


def test_live_status_names_a_job_the_cluster_does_not_know(monkeypatch, settings):
    from contextlib import contextmanager

    from raytrain_helpers.clients import rayjobs
    from raytrain_helpers.steps import train

    class _Target:
        @contextmanager
        def job_server(self, s):
            yield "http://127.0.0.1:1"

    class _Client:
        def get_job_status(self, sid):  # Ray's JobSubmissionClient on a 404
            raise RuntimeError(f"Request failed with status code 404: Job {sid} does not exist.")

    monkeypatch.setattr(train, "for_settings", lambda s: _Target())
    monkeypatch.setattr(rayjobs, "client", lambda url: _Client())
    with pytest.raises(rayjobs.JobUnknownError, match="raytrain-x"):
        train.live_status(settings, "raytrain-x")
