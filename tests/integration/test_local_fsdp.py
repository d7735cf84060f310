"""The FSDP job on a real local Ray cluster: 2 CPU workers (gloo) on 2 worker raylets, checkpoint + resume."""

import pytest

from raytrain_helpers import config as C, jobs, report, train
from raytrain_helpers.targets import local

pytestmark = pytest.mark.integration


def test_cluster_shape_and_idempotent_up(local_settings, local_cluster):
    info = local.status(local_settings)
    assert info.running and info.head is not None
    assert info.head["resources"].get("CPU", 0) == 0 and info.head["resources"].get("train_slot", 0) == 0
    assert len(info.workers) == 2 and all(w["resources"]["train_slot"] >= 1 for w in info.workers)
    again = local.up(local_settings)
    assert again.action == "reused" and {n["node_id"] for n in again.nodes} == {n["node_id"] for n in info.nodes}
    dirs = local.session_log_dirs(local_settings)
    assert len(dirs) == 3 and len({d.parent.resolve() for d in dirs}) == 3, "each raylet has its own temp dir"


def test_up_refuses_a_different_shape(local_settings, local_cluster):
    other = C.with_overrides(local_settings, worker_nodes=3)
    with pytest.raises(local.LocalClusterError, match="different shape"):
        local.up(other)


def test_fsdp_job_checkpoint_resume_and_verify(local_settings, local_cluster):
    s = C.with_overrides(local_settings, run_name="it-fsdp", steps=3, checkpoint_every=2, gpus_per_worker_node=0)
    first = jobs.submit(s, progress=False, quiet=True)
    assert first.ok, first.logs[-3000:]
    m = first.metrics
    assert m["start_step"] == 0 and m["step"] == 3 and len(m["losses"]) == 3
    assert len(first.ranks) == 2 and len({r["node_id"] for r in first.ranks}) == 2
    ckpt = first.result["checkpoint"]
    assert train.restore_check(ckpt, s.model_config_dict())["step"] == 3

    # the same run name, more steps: Ray Train resumes from the latest checkpoint
    s5 = C.with_overrides(s, steps=5)
    second = jobs.submit(s5, progress=False, quiet=True)
    assert second.ok, second.logs[-3000:]
    assert second.metrics["resumed_from"] == 3 and second.metrics["start_step"] == 3
    assert len(second.metrics["losses"]) == 2
    assert "[train] resumed from checkpoint at step 3" in second.logs

    v = report.verify_run(s5)
    assert v.ok, v.criteria.to_json()
    names = {c.name: c.status for c in v.criteria.items}
    assert names["checkpoint restorable"] == "PASS"
    assert names["workers spread over >= 2 worker nodes, none on the head"] == "PASS"


def test_worker_logs_carry_the_run_marker(local_settings, local_cluster):
    run = jobs.load_last(C.with_overrides(local_settings, run_name="it-fsdp"))
    marker = run.config["marker"]
    hits = [p for d in local.session_log_dirs(local_settings) for p in d.glob("worker-*.out")
            if f"[raytrain] marker={marker}" in p.read_text(errors="replace")]
    assert len({p.parents[2] for p in hits}) == 2, "each worker raylet holds one rank's log"
