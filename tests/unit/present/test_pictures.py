"""The pictures, drawn from data recorded by real local runs: a profiled two-rank job
(tests/fixtures/pictures/profiled_job.json), a two-rank job of 8 steps (tests/fixtures/jobs/cpu-2ranks-committed.log)
and the memory lab's timeline of one step (tests/fixtures/pictures/memory_timeline.json, from
``worker.memory_lab.timeline(shard_model)``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raytrain_helpers.clients.rayjobs import parse_result
from raytrain_helpers.plan.step_trace import rank_traces
from raytrain_helpers.present import pictures

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PROFILED = json.loads((FIXTURES / "pictures" / "profiled_job.json").read_text())
COMMITTED = parse_result((FIXTURES / "jobs" / "cpu-2ranks-committed.log").read_text())


def _bars(ax) -> list:
    return [c for c in ax.collections if c.__class__.__name__ == "PolyCollection"]


def test_the_fsdp_step_has_two_lanes_per_rank_and_every_phase(tmp_path):
    fig = pictures.fsdp_step(rank_traces(PROFILED["metrics"]["ranks"]))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "rank 0 collectives",
        "rank 0 compute",
        "rank 1 collectives",
        "rank 1 compute",
    ]
    colors = {tuple(round(x, 3) for x in b.get_facecolor()[0][:3]) for b in _bars(ax)}
    assert len(colors) == len(pictures.PHASE_COLORS), "every phase is drawn"
    path = pictures.save_png(fig, tmp_path / "runs" / "r", "fsdp_step")
    assert path == tmp_path / "runs" / "r" / "fsdp_step.png" and path.read_bytes()[:4] == b"\x89PNG"


def test_no_trace_is_a_clear_error():
    with pytest.raises(ValueError, match="profile_step"):
        pictures.fsdp_step([])


def test_the_cluster_puts_each_rank_on_its_node():
    fig = pictures.cluster(COMMITTED["nodes"], COMMITTED["metrics"]["ranks"])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts[0].startswith("head ") and sum(t.startswith("worker ") for t in texts) == 2
    ranks = [t for t in texts if t.startswith("rank ")]
    assert sorted(ranks) == ["rank 0 · cpu", "rank 1 · cpu"]
    # each rank sits in its own node's box: the rank's text follows that node's title
    for r in COMMITTED["metrics"]["ranks"]:
        title = next(i for i, t in enumerate(texts) if t.startswith("worker " + r["node_id"][:8]))
        assert texts[title + 3] == f"rank {r['rank']} · cpu"
    assert "no rank (driver, GCS)" in texts


def test_memory_through_a_step_stacks_the_kinds_in_order():
    points = json.loads((FIXTURES / "pictures" / "memory_timeline.json").read_text())
    fig = pictures.memory_step(points)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "fwd root: gathered" and labels[-1] == "step all: after AdamW"
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["sharded weights", "full weights (gathered)"]
    top = max(p["bytes"]["total"] for p in points) / 2**20
    assert ax.get_ylim()[1] >= top * 0.99


def test_the_loss_curve_says_what_it_measures():
    losses = COMMITTED["metrics"]["losses"]
    fig = pictures.loss_curve(
        {"2 ranks": list(enumerate(losses, 1))}, measures="loss on random tokens", title="benchmark"
    )
    ax = fig.axes[0]
    assert ax.get_ylabel() == "loss on random tokens" and ax.get_title() == "benchmark"
    assert list(ax.lines[0].get_ydata()) == losses and list(ax.lines[0].get_xdata()) == list(range(1, 9))
