"""The RayJob carries KubeRay's own limits, valid against the KubeRay v1.7.0 RayJob CRD (strict schema)."""

from __future__ import annotations

import pytest

from raytrain_helpers.plan import raycluster
from raytrain_helpers.plan.rayjob_limits import PRE_RUNNING_DEADLINE_S

from .test_manifests import crd_errors, settings


def test_rayjob_stops_billing_on_its_own():
    s = settings(job_timeout_s=7200)
    job = raycluster.render_rayjob(s, working_dir="s3://bucket/raytrain/job.zip")
    spec = job["spec"]
    assert spec["activeDeadlineSeconds"] == 7200
    assert spec["preRunningDeadlineSeconds"] == PRE_RUNNING_DEADLINE_S
    assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] == 600
    assert crd_errors(job) == [] and raycluster.check_rayjob(job, s) == []


def test_no_timeout_means_no_active_deadline_but_still_a_pre_running_one():
    s = settings(job_timeout_s=0)
    job = raycluster.render_rayjob(s, pre_running_deadline_s=60)
    assert "activeDeadlineSeconds" not in job["spec"] and job["spec"]["preRunningDeadlineSeconds"] == 60
    assert crd_errors(job) == [] and raycluster.check_rayjob(job, s) == []


def test_the_checks_and_the_crd_see_a_missing_or_wrong_limit():
    s = settings(job_timeout_s=7200)
    job = raycluster.render_rayjob(s)
    del job["spec"]["preRunningDeadlineSeconds"]
    job["spec"]["activeDeadlineSeconds"] = 60
    problems = raycluster.check_rayjob(job, s)
    assert any("preRunningDeadlineSeconds" in p for p in problems)
    assert any("activeDeadlineSeconds 60" in p for p in problems)
    job["spec"]["preRunningDeadlineSeconds"] = 0  # the CRD's minimum is 1
    assert any("preRunningDeadlineSeconds" in e for e in crd_errors(job))
    with pytest.raises(ValueError, match="at least 1"):
        raycluster.render_rayjob(s, pre_running_deadline_s=0)
