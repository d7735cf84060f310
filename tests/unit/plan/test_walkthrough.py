"""The whole walkthrough's cost (raytrain_helpers.plan.walkthrough): minutes per notebook, predicted training
time, and their price from the hourly estimate."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from raytrain_helpers.core import loading
from raytrain_helpers.plan import cost, perf, walkthrough

REPO = Path(__file__).resolve().parents[3]
DAY = dt.date(2026, 12, 4)  # Kubernetes 1.35 in standard support: the control plane at USD 0.10/h


def settings(*files, **params):
    return loading.load(REPO / "env.yaml", files=files, environ={}, check_installed_ray=False, **params)


def article(**params):
    params.setdefault("storage_path", "s3://my-checkpoints/raytrain")
    return settings(REPO / "profiles" / "aws-article.yaml", **params)


def test_the_defaults_cost_what_the_hourly_estimate_says_for_their_minutes():
    s = settings(target="aws")
    est = walkthrough.estimate(s, today=DAY)
    hourly = cost.estimate(s, "us-west-2", today=DAY).total_per_hour
    assert hourly == pytest.approx(2 * 4.6016 + 0.2016 + 0.10 + 0.045)
    assert [p.notebook for p in est.phases] == ["01", "02", "03", "04", "05", "06", "07", "08"]
    assert est.phases[0].minutes == 0  # 01 creates nothing billed
    # the default aws run is Qwen2.5-1.5B on GSM8K: 120 steps of about 3.2 s add about 6 min to the fixed allowances
    assert 165 <= est.minutes <= 170
    efa = perf.predict_aws(s, transport="efa")
    job, export = walkthrough.ALLOWANCES["job_start"][0], walkthrough.ALLOWANCES["export"][0]
    assert s.train.steps == 120 and 3.0 <= efa.step_s <= 3.4
    assert {p.notebook: p.minutes for p in est.phases}["05"] == pytest.approx(job + 120 * efa.step_s / 60 + export)
    assert sum(p.notebook in ("02", "04") for p in est.phases if "image pull" in p.what) == 2  # a pull per node kind
    assert est.usd == pytest.approx(hourly * est.minutes / 60)
    assert f"about {est.minutes:.0f} minutes" in est.line() and f"USD {est.usd:.2f}" in est.line()
    assert all(p.source for p in est.phases), "every figure names its source"


def test_training_and_benchmark_follow_the_predicted_step_time():
    s = article()
    est = walkthrough.estimate(s, today=DAY)
    efa = perf.predict_aws(s, transport="efa")
    sock = perf.predict_aws(s, transport="socket")
    by = {p.notebook: p.minutes for p in est.phases}
    job, export = walkthrough.ALLOWANCES["job_start"][0], walkthrough.ALLOWANCES["export"][0]
    assert by["05"] == pytest.approx(job + 100 * efa.step_s / 60 + export)
    assert by["07"] == pytest.approx(2 * job + s.train.bench_steps * (efa.step_s + sock.step_s) / 60)
    longer = walkthrough.estimate(article(steps=400), today=DAY)
    assert longer.minutes - est.minutes == pytest.approx(300 * efa.step_s / 60)
    bigger = walkthrough.estimate(article(gpu_node_count=4), today=DAY)
    assert bigger.usd_per_hour == pytest.approx(est.usd_per_hour + 2 * 4.6016)


def test_an_unpriced_instance_leaves_the_usd_open():
    s = settings(target="aws", gpu_node_type="p5e.48xlarge", gpus_per_node=8)  # known, but not in the price table
    est = walkthrough.estimate(s, today=DAY)
    assert est.usd_per_hour is None and est.usd is None
    assert "USD ?" in est.line() and est.minutes > 0
    priced = walkthrough.estimate(s, {"instances": {"p5e.48xlarge": 60.0}}, today=DAY)
    assert priced.usd == pytest.approx(priced.usd_per_hour * priced.minutes / 60)
