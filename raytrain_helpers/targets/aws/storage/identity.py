"""The in-pod storage check through a pod's own identity: the job's own storage code
(:mod:`raytrain_helpers.targets.aws.storage.check`: pyarrow's filesystem from the storage URI, as Ray Train builds
it; create_dir, write, get_file_info, read, list, delete under the run's prefix) run by Kubernetes exec of
``python3 -c`` (the Ray Train DLC carries pyarrow), and its steps read back as rows: first the pod's identity (EKS
Pod Identity's variables injected, the caller's ARN the storage role's: else "wrong identity", whose fix is the
association, never the policy), then OK, or FAILED naming the S3 operation, the IAM action missing and the fix.
Step 02 runs it from a one-off pod (:mod:`.gate`), step 04 from every Ray pod
(:mod:`raytrain_helpers.targets.aws.kuberay.access`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ....clients import aws as aws_client
from ....clients import kubernetes as kube
from ....core.settings import Settings
from ....plan import iam, s3_access
from . import bucket as storage
from . import check as storage_check
from . import state as storage_state


def check_program() -> str:
    """The in-pod check's source (sent to ``python3 -c``; argv: storage URI, folder under it)."""
    return Path(storage_check.__file__).read_text()


def location(settings: Settings) -> iam.StorageLocation:
    """The run's storage: 02's record, else computed from the settings and this AWS account."""
    rec = storage_state.load_record(settings)
    if rec:
        return iam.StorageLocation(rec["bucket"], rec["prefix"])
    sess = aws_client.session(settings.aws.region)
    return iam.storage_location(settings, aws_client.identity(sess, settings.aws.region).account)


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
            runs = f" (runs as {s['arn']})" if step == "identity" and s.get("arn") else ""
            out.append(f"storage check in {pod}: {step}: OK{runs}")
        elif step == "identity":
            out.append(
                f"storage check in {pod}: identity: FAILED - " + wrong_identity(pod, s, settings).split(": ", 1)[1]
            )
            failed = True
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


def not_injected(steps: list[dict[str, Any]]) -> bool:
    """Whether the check found no EKS Pod Identity variables in the pod (the webhook did not inject them: the pod
    was created before the association was effective; a new pod may get them)."""
    first = steps[0] if steps else {}
    return first.get("step") == "identity" and not first.get("ok") and first.get("injected") is False


def wrong_identity(pod: str, s: dict[str, Any], settings: Settings) -> str:
    """The "wrong identity" line: the pod does not run as the storage role, so a denied S3 call would blame the role's
    policy for nothing; the fix is the association (or a new pod), not the policy."""
    k, a = settings.kubernetes, settings.aws
    role, arn = s.get("role") or iam.role_name(settings), s.get("arn") or "an identity it could not read"
    assoc = (
        f"`aws eks list-pod-identity-associations --cluster-name {a.cluster_name} --namespace {k.namespace} "
        f"--service-account {k.service_account} --region {a.region}`"
    )
    if s.get("injected") is False:
        return (
            f"Ray pod {pod}: wrong identity, not a missing permission: EKS Pod Identity did not inject its "
            f"credentials ({s.get('error', '')}), so the pod's calls go out as {arn} (the node's role when it falls "
            f"back to the instance metadata), not as {role}. Fix: check that the association exists ({assoc}) and "
            f"that the eks-pod-identity-agent add-on runs on the node, then re-run notebook 02 (a new check pod) or "
            f"delete the Ray pods so they are created again after the association"
        )
    return (
        f"Ray pod {pod}: wrong identity, not a missing permission: {s.get('error', '')}. Fix: the association of "
        f"{k.namespace}/{k.service_account} must name {role} ({assoc}); re-run notebook 02, which points it there"
    )


def check_in(api, settings: Settings, pod: str, loc: iam.StorageLocation) -> list[dict[str, Any]]:
    """Run the storage check in ``pod`` (of the tutorial's namespace) by exec; its steps, as it printed them."""
    folder = f"{storage.MARKER_DIR}/{pod}-{time.time_ns()}"
    argv = ["python3", "-c", check_program(), loc.uri, folder, iam.role_name(settings), settings.aws.region]
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
    if step == "identity":
        return wrong_identity(pod, bad, settings)
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


__all__ = [
    "check_in",
    "check_program",
    "failure",
    "location",
    "not_injected",
    "passed",
    "step_rows",
    "wrong_identity",
]
