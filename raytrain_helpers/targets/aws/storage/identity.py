"""Checked, not assumed: the Ray pods' access to the checkpoint storage on the ``aws`` target.

* Step 04 (:func:`raycluster`): once the RayCluster is ready, the head pod (where Ray Train's controller builds
  its ``StorageContext``) and every Running worker pod run the job's own storage code
  (:mod:`raytrain_helpers.targets.aws.storage.check`: pyarrow's filesystem from the storage URI, as Ray Train
  builds it; create_dir, write, get_file_info, read, list, delete under the run's prefix), through the pod's own
  identity (Kubernetes exec of ``python3 -c``; the Ray Train DLC carries pyarrow). A denied call is a line naming
  the step, the S3 operation, the IAM action missing and the fix, so the job is never submitted to pods that
  cannot write their checkpoints.
  Before that, the head's Ray Jobs API must answer (:func:`.podwait.wait_for_jobs_api`).
* Step 06 (:func:`infra_criteria`): 04's rows plus "checkpoint in storage", the latest checkpoint's objects
  listed under the run's prefix (the notebook's own AWS identity lists them).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ....clients import aws as aws_client
from ....clients import kubernetes as kube
from ....core.paths import runs_dir
from ....core.settings import Settings
from ....core.validation import ConfigError
from ....plan import iam, s3_access
from ....plan.kube_objects import name_of, phase_of
from ...base import KubeRayResult
from ..kuberay import pods as kuberay_pods
from ..kuberay import podwait
from ..kuberay import raycluster as kuberay
from ..kuberay import rows as kuberay_rows
from . import bucket as storage
from . import check as storage_check
from . import state as storage_state

#: 06's row.
INFRA_CHECKPOINT = "checkpoint in storage"


def check_program() -> str:
    """The in-pod check's source (sent to ``python3 -c``; argv: storage URI, folder under it)."""
    return Path(storage_check.__file__).read_text()


# ==============================================================================================================
# Step 04: the RayCluster, then the access check from inside the Ray pods
# ==============================================================================================================


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


def location(settings: Settings) -> iam.StorageLocation:
    """The run's storage: 02's record, else computed from the settings and this AWS account."""
    rec = storage_state.load_record(settings)
    if rec:
        return iam.StorageLocation(rec["bucket"], rec["prefix"])
    sess = aws_client.session(settings.aws.region)
    return iam.storage_location(settings, aws_client.identity(sess, settings.aws.region).account)


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
        done = ", ".join(storage_check.STEPS[1:])
        line = (
            f"storage access from {len(results)} Ray pod(s) (head and workers), with pyarrow's S3 filesystem as Ray "
            f"Train builds it: {done} under {loc.uri}/{storage.MARKER_DIR}/ OK"
        )
        return True, [line], []
    pod, steps = failed[0]
    return False, [failure(p, s, loc, settings) for p, s in failed], step_rows(pod, steps, loc, settings)


def step_rows(pod: str, steps: list[dict[str, Any]], loc: iam.StorageLocation, settings: Settings) -> list[str]:
    """One line per step of the check in ``pod``: OK, FAILED with the operation, action and fix, or not run."""
    by_step = {s.get("step"): s for s in steps}
    out, failed = [], False
    for step in storage_check.STEPS:
        s = by_step.get(step)
        if failed or s is None:
            out.append(f"storage check in {pod}: {step}: not run")
            failed = True
        elif s.get("ok"):
            out.append(f"storage check in {pod}: {step}: OK")
        else:
            out.append(
                f"storage check in {pod}: {step}: FAILED - " + failure(pod, [s], loc, settings).split(": ", 1)[1]
            )
            failed = True
    return out


def passed(steps: list[dict[str, Any]]) -> bool:
    """Whether every step of the storage check ran and passed."""
    done = [s.get("step") for s in steps if s.get("ok")]
    return done == list(storage_check.STEPS)


def check_in(api, settings: Settings, pod: str, loc: iam.StorageLocation) -> list[dict[str, Any]]:
    """Run the storage check in ``pod`` (of the tutorial's namespace) by exec; its steps, as it printed them."""
    folder = f"{storage.MARKER_DIR}/{pod}-{time.time_ns()}"
    argv = ["python3", "-c", check_program(), loc.uri, folder]
    try:
        out = kube.exec_in_pod(settings, pod, argv, client=api, timeout_s=120)
    except kube.ExecError as e:
        out = e.stdout or ""
        if not out.strip():
            text = (e.stderr or str(e)).strip().splitlines()
            return [{"step": "exec python3", "ok": False, "error": f"exit {e.returncode}: {text[-1] if text else ''}"}]
    except kube.K8sError as e:
        return [{"step": "exec", "ok": False, "error": f"K8sError: {e}"}]
    steps = []
    for line in out.splitlines():
        try:
            steps.append(json.loads(line))
        except ValueError:
            continue
    return steps


def failure(pod: str, steps: list[dict[str, Any]], loc: iam.StorageLocation, settings: Settings) -> str:
    """One line for a pod whose check failed: the step, and for an AWS error the operation, the IAM action
    missing (and on which resource) and the fix."""
    k = settings.kubernetes
    bad = next((s for s in steps if not s.get("ok")), None)
    if bad is None:
        return f"Ray pod {pod}: the storage check stopped after {len(steps)} step(s) without saying why"
    step, error = str(bad.get("step", "?")), str(bad.get("error", ""))
    head = f"Ray pod {pod}: {step} on {loc.uri}/ failed"
    d = s3_access.denial(step, error)
    if d is None:
        return f"{head}: {error}"
    if d.access_denied:
        fix = (
            f"re-run notebook 02 (cluster up), which restores the storage role's policy (and the pod identity "
            f"association of {k.namespace}/{k.service_account}), then 04"
        )
        if settings.aws.shared_cluster:  # 02 ran in the facilitator's folder, which also associates the attendees
            fix = (
                f"ask the facilitator to run `raytrain-tutorial handout storage DIR` (it associates the storage role "
                f"with {k.namespace}/{k.service_account}; aws.storage_per_namespace: true), then 04"
            )
        return f"{head}: {d.operation} was denied, the pod's role lacks {d.action} on {_resource(d, loc)}. Fix: {fix}"
    if d.kind == "NO_SUCH_BUCKET":
        return f"{head}: bucket {loc.bucket} does not exist. Fix: re-run notebook 02 (cluster up)"
    return f"{head}: {d.operation} answered {d.kind}: {error}"


def _resource(d: s3_access.Denial, loc: iam.StorageLocation) -> str:
    if d.action == "s3:ListBucket":
        return f"{loc.bucket_arn} (without an s3:prefix condition: {d.operation} carries none)"
    return loc.objects_arn + (
        f" and {', '.join(loc.marker_arns)}" if d.action == "s3:PutObject" and loc.parents else ""
    )


# ==============================================================================================================
# Step 06: the latest checkpoint's objects in the bucket
# ==============================================================================================================


def infra_criteria(settings: Settings, *, client=None) -> list[tuple[str, bool | None, str]]:
    """06 on aws: the Kubernetes rows of :func:`kuberay_rows.infra_criteria`, then :func:`checkpoint_row`."""
    return [*kuberay_rows.infra_criteria(settings, client=client), checkpoint_row(settings)]


def checkpoint_row(settings: Settings, job: dict[str, Any] | None = None) -> tuple[str, bool | None, str]:
    """The latest checkpoint of the run's last job (05's record), listed in S3: its objects and bytes."""
    if job is None:
        p = runs_dir(settings) / settings.run_name / "job.json"
        job = json.loads(p.read_text()) if p.is_file() else None
    if not job:
        return INFRA_CHECKPOINT, False, "no job recorded for this run: run notebook 05 first"
    result = job.get("result") or {}
    storage_path, ckpt = str(result.get("storage_path") or ""), str(result.get("checkpoint") or "")
    if not storage_path.startswith("s3://"):
        return INFRA_CHECKPOINT, None, f"the job wrote its checkpoints to {storage_path or '?'}, not to S3"
    if not ckpt:
        return INFRA_CHECKPOINT, False, "the job reported no checkpoint"
    bucket, _ = iam.storage_bucket_and_prefix(storage_path)
    key = ckpt.removeprefix("s3://").removeprefix(f"{bucket}/").strip("/") + "/"
    try:
        s3 = aws_client.client(aws_client.session(settings.aws.region), "s3", settings.aws.region)
        objects = aws_client.paginate(s3, "list_objects_v2", "Contents", Bucket=bucket, Prefix=key)
    except Exception as e:  # noqa: BLE001 - any failure to list is the finding
        return INFRA_CHECKPOINT, False, f"s3://{bucket}/{key}: {aws_client.err_code(e)}: {aws_client.err_msg(e)}"
    size = sum(o.get("Size", 0) for o in objects)
    evidence = f"s3://{bucket}/{key}: {len(objects)} object(s), {size} bytes"
    return INFRA_CHECKPOINT, bool(objects), evidence if objects else f"{evidence} (nothing there)"


__all__ = [
    "INFRA_CHECKPOINT",
    "access_check",
    "check_in",
    "check_program",
    "checkpoint_row",
    "failure",
    "infra_criteria",
    "location",
    "passed",
    "raycluster",
    "step_rows",
]
