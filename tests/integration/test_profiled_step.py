"""One profiled FSDP step on the real local Ray cluster, submitted through the Jobs API like the training job:
every rank's trace shows each decoder layer's weights all-gathered before its forward and again before its
backward, and its gradients reduce-scattered after its backward. Its pictures are drawn and written into the run's
folder."""

from __future__ import annotations

import json
import os
import time

import pytest

from raytrain_helpers.core.paths import run_dir
from raytrain_helpers.plan.step_trace import order_of, phases, rank_traces
from raytrain_helpers.steps import pictures

pytestmark = pytest.mark.integration


def test_the_profiled_step_gathers_before_compute_and_reduces_after_backward(local_settings, local_cluster):
    t0 = time.monotonic()
    job = pictures.profile(local_settings)
    print(f"profiled job took {time.monotonic() - t0:.1f} s")
    assert job.ok, job.logs[-3000:]
    traces = rank_traces(job.metrics["ranks"])
    assert [t["rank"] for t in traces] == list(range(len(job.ranks))) and len(traces) >= 2
    layers = int(job.job_config.model["num_hidden_layers"])
    for trace in traces:
        order = order_of(trace)
        assert sorted(order) == [f"layers.{i}" for i in range(layers)], order
        for layer, seen in order.items():
            assert all(seen.values()), (trace["rank"], layer, seen)
        kinds = [p.kind for p in phases(trace)]
        assert kinds.index("all-gather") < kinds.index("forward") and kinds[-1] == "optimizer", kinds
        assert max(i for i, k in enumerate(kinds) if k == "reduce-scatter") > kinds.index("backward")
    run = f"{local_settings.run_name}-profile"
    pictures.fsdp_step(local_settings, job)
    pictures.cluster(local_settings, job)
    for name in ("fsdp_step", "cluster"):
        assert (run_dir(local_settings, run) / f"{name}.png").stat().st_size > 10_000
    if os.environ.get("RAYTRAIN_SAVE_FIXTURE"):  # how tests/fixtures/pictures/profiled_job.json was recorded
        record = dict(result=job.result, metrics=job.metrics, steps=job.steps, config=job.config)
        with open(os.environ["RAYTRAIN_SAVE_FIXTURE"], "w") as f:
            json.dump(record, f, default=str)
