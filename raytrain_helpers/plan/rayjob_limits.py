"""KubeRay's own limits on a RayJob, so that a forgotten job stops billing.

Fields of the RayJob CRD of KubeRay v1.7.0 (``ray.io_rayjobs.yaml`` of the release, kept in
``schemas/kuberay/v1.7.0`` of the repository; checked 2026-12-04), all under ``spec``:

* ``activeDeadlineSeconds`` (int32): the whole job, from its start, is stopped after this many seconds; rendered from
  ``train.job_timeout_s`` (left out when that is 0, no limit).
* ``preRunningDeadlineSeconds`` (int32, minimum 1): a job that has not reached Running after this many seconds is
  failed (pods stuck Pending on GPUs that never come, an image that never pulls).
* ``shutdownAfterJobFinishes`` with ``ttlSecondsAfterFinished`` (int32): the RayCluster is deleted that many seconds
  after the job ends, whatever its end.
"""

from __future__ import annotations

from typing import Any

from ..core.settings import Settings

#: Seconds a RayJob may wait before it runs (GPU nodes scaling up, the image pulled): 30 minutes.
PRE_RUNNING_DEADLINE_S = 1800
#: Seconds the RayCluster of a finished RayJob is kept for its logs before KubeRay deletes it.
TTL_AFTER_FINISHED_S = 600


def limits(settings: Settings, *, pre_running_deadline_s: int = PRE_RUNNING_DEADLINE_S) -> dict[str, int]:
    """The template's values: ``active_deadline_s`` (0 = none), ``pre_running_deadline_s``."""
    if int(pre_running_deadline_s) < 1:
        raise ValueError("pre_running_deadline_s must be at least 1 (the RayJob CRD's minimum). Fix: e.g. 1800")
    return dict(active_deadline_s=int(settings.train.job_timeout_s), pre_running_deadline_s=int(pre_running_deadline_s))


def limit_problems(spec: dict[str, Any], settings: Settings) -> list[str]:
    """What a RayJob spec lacks of the limits above."""
    problems = []
    if spec.get("shutdownAfterJobFinishes") is not True:
        problems.append("RayJob: shutdownAfterJobFinishes must be true (the GPU pods are released after the job)")
    if not isinstance(spec.get("ttlSecondsAfterFinished"), int):
        problems.append("RayJob: ttlSecondsAfterFinished is missing (when KubeRay deletes the finished cluster)")
    if not spec.get("preRunningDeadlineSeconds"):
        problems.append("RayJob: preRunningDeadlineSeconds is missing (a job stuck before it runs would hold GPUs)")
    want = settings.train.job_timeout_s
    if want and spec.get("activeDeadlineSeconds") != want:
        have = spec.get("activeDeadlineSeconds")
        problems.append(f"RayJob: activeDeadlineSeconds {have!r}, expected train.job_timeout_s ({want})")
    return problems


__all__ = ["PRE_RUNNING_DEADLINE_S", "TTL_AFTER_FINISHED_S", "limit_problems", "limits"]
