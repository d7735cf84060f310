"""The stack's hourly cost (raytrain_helpers.plan.cost): the dated table, overrides, the estimate."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from raytrain_helpers.core.config import ConfigError  # noqa: E402
from raytrain_helpers.plan import cost  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402

R = "us-west-2"


def test_price_overrides(tmp_path):
    s = make_settings(tmp_path)
    assert cost.estimate(s, R).total_per_hour == pytest.approx(2 * 4.6016 + 0.2016 + 0.10 + 0.045)
    over = cost.estimate(s, R, {"instances": {"g6.12xlarge": 1.0}, "nat_gateway": 0.0})
    assert over.total_per_hour == pytest.approx(2 * 1.0 + 0.2016 + 0.10)
    assert "prices partly overridden by the caller" in over.notes
    f = tmp_path / "prices.yaml"
    f.write_text("regions: {us-west-2: {m7i.xlarge: 1.5}}\n")
    assert cost.estimate(s, R, f).total_per_hour == pytest.approx(2 * 4.6016 + 1.5 + 0.145)
    with pytest.raises(ConfigError, match="unknown price keys"):
        cost.load({"gpu": 1})
    with pytest.raises(ConfigError, match="not a price"):
        cost.load({"instances": {"g6.12xlarge": "cheap"}})
    with pytest.raises(ConfigError, match="does not exist"):
        cost.load(tmp_path / "absent.yaml")
    est = cost.estimate(s, "eu-central-1")
    assert any("usually dearer" in n for n in est.notes)


def test_unknown_type_makes_the_estimate_incomplete(tmp_path, monkeypatch):
    s = make_settings(tmp_path)
    monkeypatch.delitem(cost.DEFAULTS["instances"], "g6.12xlarge")
    est = cost.estimate(s, R)
    assert not est.complete and est.rows[0] == ("GPU node g6.12xlarge", "2", "?", "?")
    assert any("no price for g6.12xlarge" in n for n in est.notes)
    assert est.total_per_hour == pytest.approx(0.2016 + 0.10 + 0.045)


# --------------------------------------------------------------------------------------------------------------
# The EKS control plane: standard ($0.10/h) or extended ($0.60/h) support, from the dated calendar
# (raytrain_helpers.core.eks_versions); the day is passed in, never read from the clock here.
# --------------------------------------------------------------------------------------------------------------

DAY = dt.date(2026, 12, 4)


def plane(est):
    return next(r for r in est.rows if r[0].startswith("EKS control plane"))


def test_the_default_version_is_in_standard_support_on_the_day_checked(tmp_path):
    est = cost.estimate(make_settings(tmp_path), R, today=DAY)
    assert plane(est) == ("EKS control plane", "1", "0.1000", "0.10") and est.warnings == []
    assert est.support == "Kubernetes 1.35: standard support until 2027-03-27"
    assert not any(n.startswith("WARNING") for n in est.notes)


def test_a_version_in_extended_support_costs_six_times_as_much_and_is_a_warning(tmp_path):
    s = make_settings(tmp_path, k8s_version="1.34")  # left standard support on 2026-12-02
    est = cost.estimate(s, R, today=DAY)
    assert plane(est) == ("EKS control plane (1.34, extended support)", "1", "0.6000", "0.60")
    assert est.total_per_hour == pytest.approx(2 * 4.6016 + 0.2016 + 0.60 + 0.045)
    (w,) = est.warnings
    assert w.startswith("aws.k8s_version = '1.34' is in EKS extended support since 2026-12-02 (until 2027-12-02)")
    assert w.endswith('Fix: set `k8s_version: "1.35"` under aws: in env.yaml (or -p k8s_version 1.35)')
    assert f"WARNING: {w}" in est.notes  # shown wherever the estimate's notes are (01, 02's plan, the cost notes)
    # the day before it left standard support, it was standard but within 30 days: a warning, the standard price
    est = cost.estimate(s, R, today=dt.date(2026, 12, 1))
    assert plane(est)[3] == "0.10" and "leaves EKS standard support on 2026-12-02 (in 1 days)" in est.warnings[0]
    # an override of the extended price is used
    assert plane(cost.estimate(s, R, {"eks_extended_support": 0.5}, today=DAY))[3] == "0.50"


def test_30_days_before_the_end_of_standard_support_the_plan_warns(tmp_path):
    s = make_settings(tmp_path)
    assert cost.estimate(s, R, today=dt.date(2027, 2, 24)).warnings == []  # 31 days before 2027-03-27
    (w,) = cost.estimate(s, R, today=dt.date(2027, 2, 25)).warnings
    assert "aws.k8s_version = '1.35' leaves EKS standard support on 2027-03-27 (in 30 days)" in w
    # on the day itself the version is billed as extended (EKS: from the start of that day, UTC)
    assert plane(cost.estimate(s, R, today=dt.date(2027, 3, 27)))[3] == "0.60"


def test_versions_out_of_support_or_newer_than_the_calendar(tmp_path):
    (w,) = cost.estimate(make_settings(tmp_path, k8s_version="1.30"), R, today=DAY).warnings
    assert "left EKS extended support on 2026-07-23: EKS creates no cluster of it. Fix:" in w
    (w,) = cost.estimate(make_settings(tmp_path, k8s_version="1.36"), R, today=DAY).warnings
    assert "newer than the EKS release calendar" in w and "aws eks describe-cluster-versions" in w
    (w,) = cost.estimate(make_settings(tmp_path, k8s_version="1.20"), R, today=DAY).warnings
    assert "is not an EKS version in the release calendar" in w
