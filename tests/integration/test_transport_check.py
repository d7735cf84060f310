"""The transport check on the real local Ray cluster: one rank on each worker raylet, placed STRICT_SPREAD, an
all-reduce timed between them, submitted through the Jobs API like the training job.

Without GPUs (or with one GPU, which the two worker raylets cannot share) the ranks use gloo: the bandwidth is
measured and the transport reported as not applicable, honestly. With a GPU for each worker raylet the ranks use
NCCL: P2P passes, and the same check with P2P and SHM disabled catches the socket fallback."""

from __future__ import annotations

import time

import pytest

from raytrain_helpers.steps import transport
from raytrain_helpers.targets import for_settings
from raytrain_helpers.targets.local import raylets

pytestmark = pytest.mark.integration


def _placed_one_per_worker(check, settings) -> None:
    """The ranks ran on two different worker raylets, as the cluster lists them now (a test before this one may have
    restarted a raylet under its name, with a new node id)."""
    r = check.result
    workers = {n["node_id"] for n in raylets.status(settings).workers}
    assert len({x["node_id"] for x in r["ranks"]}) == 2, "the ranks share a node: STRICT_SPREAD did not hold"
    assert {x["node_id"] for x in r["ranks"]} <= workers, (r["ranks"], workers)
    assert r["busbw_gbs"] > 0 and r["busbw_gbs"] == pytest.approx(r["size_bytes"] / 1e9 / r["seconds"])


def test_the_check_runs_one_rank_per_worker_node_and_measures_the_all_reduce(local_settings, local_cluster):
    t0 = time.monotonic()
    check = transport.run(local_settings, timeout_s=180, again=True)  # measured, whatever an earlier test kept
    took = time.monotonic() - t0
    check.show()
    print(f"check took {took:.1f} s in all (the job's driver {check.result.get('wall_s', 0):.1f} s)")
    _placed_one_per_worker(check, local_settings)
    assert check.submission_id.startswith(f"raytrain-{local_settings.run_name}-transport-") and not check.reused
    # asked again on the same nodes with the same settings (Ray's real state API lists them): the kept verdict
    kept = transport.run(local_settings, timeout_s=180)
    assert kept.reused and kept.submission_id == check.submission_id and kept.message == check.message
    if for_settings(local_settings).job_defaults(local_settings).use_gpu is not True:
        assert check.ok and check.verdict == "n/a" and check.transport == "n/a: CPU (gloo)", check.message
        assert check.result["backend"] == "gloo" and check.result["size_bytes"] == transport.CPU_SIZE
        return
    assert check.ok and check.verdict == "pass" and check.transport.startswith("P2P"), check.message
    assert check.result["backend"] == "nccl" and check.expected == "p2p"
    forced = transport.run(local_settings, timeout_s=180, extra_env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})
    forced.show()
    assert not forced.ok and forced.verdict == "fallback" and "NET/Socket" in forced.transport, forced.message
    assert "Fix: nccl.env sets NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1" in forced.message
    _placed_one_per_worker(forced, local_settings)
