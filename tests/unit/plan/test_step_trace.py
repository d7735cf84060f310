"""A profiled FSDP step read as phases: on spans a real two-rank job recorded on the local Ray cluster
(tests/fixtures/pictures/profiled_job.json, written by tests/integration/test_profiled_step.py with
RAYTRAIN_SAVE_FIXTURE set)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raytrain_helpers.plan.step_trace import KINDS, order_of, phases, rank_traces

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "pictures" / "profiled_job.json"


@pytest.fixture(scope="module")
def traces():
    return rank_traces(json.loads(FIXTURE.read_text())["metrics"]["ranks"])


def test_each_rank_gathers_each_layer_before_its_forward_and_reduces_after_its_backward(traces):
    assert [t["rank"] for t in traces] == [0, 1]
    for trace in traces:
        order = order_of(trace)
        assert sorted(order) == ["layers.0", "layers.1"]
        assert all(all(seen.values()) for seen in order.values()), order


def test_the_phases_run_in_the_order_of_a_step(traces):
    ph = phases(traces[0])
    assert {p.kind for p in ph} == set(KINDS)
    fw = [p.module for p in ph if p.kind == "forward"]
    bw = [p.module for p in ph if p.kind == "backward"]
    assert fw == ["layers.0", "layers.1"] and bw == ["layers.1", "layers.0"], "backward runs the layers in reverse"
    assert ph[-1].kind == "optimizer" and ph[0].kind == "all-gather" and ph[0].module == "root"
    assert all(p.duration_us >= 0 for p in ph)


def test_a_step_with_its_forward_ungathered_is_seen(traces):
    """The same spans without layers.1's all-gathers: the check says so for that layer only."""
    spans = [s for s in traces[0]["spans"] if s[0] != "FSDP::all_gather (model.layers.1)"]
    order = order_of(dict(traces[0], spans=spans))
    assert not order["layers.1"]["gathered_before_forward"] and all(order["layers.0"].values())


def test_ranks_without_a_trace_are_left_out():
    assert rank_traces([{"rank": 0, "step_trace": None}, {"rank": 1}]) == [] and rank_traces(None) == []
