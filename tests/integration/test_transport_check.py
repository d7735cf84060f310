"""The transport check on the real local Ray cluster: one rank on each worker raylet, placed STRICT_SPREAD, an
all-reduce timed between them, submitted through the Jobs API like the training job. This machine has no GPU, so
the ranks use gloo: the bandwidth is measured and the transport reported as not applicable, honestly."""

from __future__ import annotations

import time

import pytest

from raytrain_helpers.steps import transport

pytestmark = pytest.mark.integration


def test_the_check_runs_one_rank_per_worker_node_and_measures_the_all_reduce(local_settings, local_cluster):
    t0 = time.monotonic()
    check = transport.run(local_settings, timeout_s=120)
    took = time.monotonic() - t0
    check.show()
    r = check.result
    assert check.ok and check.verdict == "n/a" and check.transport == "n/a: CPU (gloo)", check.message
    assert r["backend"] == "gloo" and r["world"] == 2 and r["size_bytes"] == transport.CPU_SIZE
    assert len({x["node_id"] for x in r["ranks"]}) == 2, "the ranks share a node: STRICT_SPREAD did not hold"
    workers = {n["node_id"] for n in local_cluster.workers}
    assert {x["node_id"] for x in r["ranks"]} <= workers, (r["ranks"], local_cluster.nodes)
    assert r["busbw_gbs"] > 0 and r["busbw_gbs"] == pytest.approx(r["size_bytes"] / 1e9 / r["seconds"])
    assert check.submission_id.startswith(f"raytrain-{local_settings.run_name}-transport-")
    print(f"check took {took:.1f} s in all (the job {r['wall_s']:.1f} s)")
