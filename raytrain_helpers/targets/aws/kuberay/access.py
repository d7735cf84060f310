"""Step 04 on aws, checked rather than assumed: once the RayCluster is ready, its Ray Jobs API must answer and the
head pod (where Ray Train's controller builds its ``StorageContext``) and every Running worker pod must reach the
checkpoint storage through the pod's own identity, with the job's own storage code
(:mod:`raytrain_helpers.targets.aws.storage.identity` runs it in a pod). A denied call is a line naming the step,
the S3 operation, the IAM action missing and the fix, so the job is never submitted to pods that cannot write their
checkpoints.
"""

from __future__ import annotations

from typing import Any

from ....clients import aws as aws_client
from ....clients import kubernetes as kube
from ....core.settings import Settings
from ....core.validation import ConfigError
from ....plan.kube_objects import name_of, phase_of
from ...base import KubeRayResult
from ..storage import bucket as storage
from ..storage import check as storage_check
from ..storage.identity import check_in, failure, location, passed, step_rows
from . import pods as kuberay_pods
from . import podwait
from . import raycluster as kuberay


def raycluster(settings: Settings, *, assume_yes: bool = False, client=None, **options: Any) -> KubeRayResult:
    """04 on aws: :func:`kuberay.raycluster`, then :func:`access_check` in the head and every Running worker pod;
    the result is not ok when a pod cannot use the storage (the job would fail creating its storage context)."""
    result = kuberay.raycluster(settings, assume_yes=assume_yes, client=client, **options)
    if not result.ok:
        return result
    head = kuberay.head_pod(settings, client)
    ok, said = podwait.wait_for_jobs_api(settings, name_of(head or {}), client=client, log=options.get("log", print))
    if not ok:  # a Ready head whose Jobs API does not answer: 05 could not submit
        result.ok = False
        result.message += ", but its Ray Jobs API does not answer"
        result.problems.append(said)
        return result
    ok, lines, rows = access_check(settings, client=client, with_rows=True)
    if ok:
        result.message = "; ".join([result.message, *lines])
    else:
        result.ok = False
        result.message += ", but the Ray pods cannot use the checkpoint storage"
        result.problems += lines
        result.diagnosis += rows
    return result


def access_check(settings: Settings, *, client=None, with_rows: bool = False):
    """Run the job's storage calls under the prefix from the head pod and every Running worker pod; returns
    (ok, lines), a failure naming the step, the S3 operation, the IAM action missing and the fix; with
    ``with_rows`` also one line per step of the first pod that failed (:func:`step_rows`)."""
    ok, lines, rows = _access_check(settings, client)
    return (ok, lines, rows) if with_rows else (ok, lines)


def _access_check(settings: Settings, client) -> tuple[bool, list[str], list[str]]:
    try:
        loc = location(settings)
    except (ConfigError, aws_client.AwsError) as e:
        return False, [f"checkpoint storage unknown: {e}. Fix: run notebook 02 (cluster up) first"], []
    with kube.using_client(settings, client) as api:
        pods = [p for p in kuberay_pods.cluster_pods(api, settings) if phase_of(p) == "Running"]
        pods.sort(key=lambda p: kuberay_pods.pod_role(p) != "head")
        if not any(kuberay_pods.pod_role(p) == "worker" for p in pods):
            return False, ["no Running worker pod to check the storage from. Fix: see the pods above"], []
        results = [(name_of(p), check_in(api, settings, name_of(p), loc)) for p in pods]
    failed = [(pod, steps) for pod, steps in results if not passed(steps)]
    if not failed:
        done = ", ".join(storage_check.STEPS[2:])
        line = (
            f"storage access from {len(results)} Ray pod(s) (head and workers), with pyarrow's S3 filesystem as Ray "
            f"Train builds it: {done} under {loc.uri}/{storage.MARKER_DIR}/ OK"
        )
        return True, [line], []
    pod, steps = failed[0]
    return False, [failure(p, s, loc, settings) for p, s in failed], step_rows(pod, steps, loc, settings)


__all__ = ["access_check", "raycluster"]
