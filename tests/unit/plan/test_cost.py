"""The stack's hourly cost (raytrain_helpers.plan.cost): the dated table, overrides, the estimate."""

from __future__ import annotations

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
