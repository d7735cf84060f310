"""The settings summary: in full once (01), a two-line reminder in every later chapter."""

from __future__ import annotations

import pytest

import raytrain_helpers as rt
from raytrain_helpers.core import config
from raytrain_helpers.core.tables import MAX_WIDTH
from raytrain_helpers.plan import cost


@pytest.fixture
def settings(clean_env, repo_root):
    return config.load(repo_root / "env.yaml", environ={})


def test_brief_is_two_lines_with_the_run_and_the_hourly_cost(settings, capsys):
    rt.describe(settings, brief=True)
    lines = capsys.readouterr().out.splitlines()
    per_hour = cost.estimate(settings, settings.aws.region).total_per_hour
    assert len(lines) == 2 and max(len(line) for line in lines) <= MAX_WIDTH, lines
    assert f"run {settings.run_name}" in lines[0] and f"USD {per_hour:.2f}/h" in lines[1]
    rt.describe(settings, brief=True, minutes=30)
    assert f"about 30 min, USD {per_hour / 2:.2f}" in capsys.readouterr().out


def test_a_chapter_prices_its_row_of_the_walkthrough_estimate(settings, capsys):
    """notebook="04": the minutes come from the walkthrough estimate (the one source of the chapters' aws times),
    and the line says they are estimated."""
    from raytrain_helpers.plan import walkthrough

    rt.describe(settings, brief=True, notebook="04")
    lines = capsys.readouterr().out.splitlines()
    minutes = walkthrough.chapter_minutes(settings, "04")
    per_hour = cost.estimate(settings, settings.aws.region).total_per_hour
    assert minutes == walkthrough.ALLOWANCES["kuberay"][0] + walkthrough.IMAGE_PULL_MIN
    assert f"about {minutes:.0f} min, USD {per_hour * minutes / 60:.2f}" in lines[1] and "estimated" in lines[1]
    assert max(len(line) for line in lines) <= MAX_WIDTH, lines


def test_full_summary_names_the_model_and_the_versions(settings, capsys):
    rt.describe(settings)
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 3 and f"Ray {settings.versions.ray_version}" in out and "USD" not in out
