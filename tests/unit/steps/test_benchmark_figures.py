"""07's performance table: each run's figures under the keys benchmarks/results/ records, from the ranks' summary."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers.clients.rayjobs import JobRun
from raytrain_helpers.steps import benchmark
from tests.helpers import job_cfg

GIB = 1024**3


def _bench(ranks, **cfg) -> benchmark.BenchRun:
    job = JobRun(
        "raytrain-t-1",
        "SUCCEEDED",
        result=dict(ok=True, metrics=dict(ranks=ranks)),
        config=job_cfg(**cfg).to_dict(),
    )
    return benchmark.BenchRun("p2p", "p2p", {}, job)


def _rank(tps, step, mfu, peak_gib, gpu="NVIDIA H200"):
    return dict(
        tokens_per_s=tps, mean_step_time_s=step, mfu=mfu, peak_mem_bytes=int(peak_gib * GIB), gpu=gpu, device="cuda:0"
    )


def test_two_gpu_ranks_give_the_mean_throughput_the_slowest_step_the_lowest_mfu_and_the_highest_peak():
    (row,) = benchmark.figures(
        [_bench([_rank(54_000, 0.83, 0.53, 105.0), _rank(52_000, 0.86, 0.51, 106.5)], batch_size=22)]
    )
    assert row == dict(
        variant="p2p",
        gpu="NVIDIA H200",
        world_size=2,
        batch=22,
        tokens_per_s_per_gpu=53_000,
        mfu=0.51,
        step_s=0.86,
        peak_memory_gib=pytest.approx(106.5),
    )


def test_cpu_workers_have_no_mfu_and_a_summary_without_a_gpu_name_shows_the_device():
    rank = _rank(900, 0.1, None, 1.5)
    del rank["gpu"]
    (row,) = benchmark.figures([_bench([rank], batch_size=4)])
    assert row["gpu"] == "cuda:0" and row["mfu"] is None and row["batch"] == 4


def test_the_table_names_its_columns_as_the_results_files_do(capsys):
    benchmark.show_figures([_bench([_rank(53_354.4, 0.844, 0.528, 105.3)], batch_size=22)])
    out = capsys.readouterr().out
    for key in ("tokens_per_s_per_gpu", "peak_memory_gib", "world_size"):
        assert key in out
    assert "53,354" in out and "52.8%" in out and "0.844" in out and "105.3" in out


def test_every_device_result_against_the_yardstick_has_the_recorded_keys_and_the_docs_quote_its_figures():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    found = sorted((root / "benchmarks" / "results").glob("*vs-yardstick*.json"))
    assert found, "no device result against the yardstick in benchmarks/results/"
    page = (root / "docs" / "performance.md").read_text()
    for path in found:
        rec = json.loads(path.read_text())
        keys = [k for k in benchmark.FIGURES if k != "variant"] + ["yardstick_tokens_per_s_per_gpu", "commit"]
        assert not [k for k in keys if rec.get(k) in (None, "")], path.name
        assert path.name in page and f"{rec['tokens_per_s_per_gpu']:,.0f}" in page, path.name
