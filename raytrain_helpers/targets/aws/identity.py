"""Checked, not assumed: the Ray pods' access to the checkpoint storage on the ``aws`` target.

* Step 04 (:func:`raycluster`): once the RayCluster is ready, every Running worker pod writes, lists, reads
  and deletes a marker object under the run's prefix, through the pod's own identity (Kubernetes exec of a
  short Python program using boto3, which the Ray Train DLC carries). A failure names the IAM action that was
  denied, so the job is never submitted to pods that cannot write their checkpoints.
  Before that, the head's Ray Jobs API must answer (:func:`.podwait.wait_for_jobs_api`).
* Step 06 (:func:`infra_criteria`): 04's rows plus "checkpoint in storage", the latest checkpoint's objects
  listed under the run's prefix (the notebook's own AWS identity lists them).
"""

from __future__ import annotations

import json
from typing import Any

from ...clients import aws as aws_client
from ...clients import kubernetes as kube
from ...core.config import ConfigError, Settings
from ...core.paths import runs_dir
from ...plan import iam
from ...plan.kube_objects import name_of, phase_of
from ..base import KubeRayResult
from . import kuberay, podwait, storage

#: 06's row.
INFRA_CHECKPOINT = "checkpoint in storage"
#: The in-pod check: argv bucket, key prefix, pod name; prints one JSON line per step (action, ok, code).
ACCESS_CHECK = r"""
import json, sys, time
bucket, prefix, pod = sys.argv[1:4]
def say(action, ok, code="", message=""):
    print(json.dumps({"action": action, "ok": ok, "code": code, "message": message[:300]}), flush=True)
try:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError as e:
    say("import boto3", False, "ImportError", str(e)); sys.exit(0)
s3 = boto3.client("s3")
key = "%s/%s-%d" % (prefix, pod, time.time_ns())
try:
    say("sts:GetCallerIdentity", True, "", boto3.client("sts").get_caller_identity()["Arn"])
except (ClientError, BotoCoreError) as e:
    say("sts:GetCallerIdentity", False, type(e).__name__, str(e)); sys.exit(0)
listed = lambda: [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", ())]
steps = [
    ("s3:PutObject", lambda: s3.put_object(Bucket=bucket, Key=key, Body=b"raytrain")),
    ("s3:ListBucket", lambda: key in listed()),
    ("s3:GetObject", lambda: s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"raytrain"),
    ("s3:DeleteObject", lambda: s3.delete_object(Bucket=bucket, Key=key)),
]
for action, call in steps:
    try:
        found = call()
    except ClientError as e:
        say(action, False, e.response.get("Error", {}).get("Code", "?"), str(e)); break
    except BotoCoreError as e:
        say(action, False, type(e).__name__, str(e)); break
    if found is False:
        say(action, False, "Mismatch", "the marker object was not found as written"); break
    say(action, True)
"""


# ==============================================================================================================
# Step 04: the RayCluster, then the access check from inside the worker pods
# ==============================================================================================================


def raycluster(settings: Settings, *, assume_yes: bool = False, client=None, **options: Any) -> KubeRayResult:
    """04 on aws: :func:`kuberay.raycluster`, then :func:`access_check` in every Running worker pod; the result
    is not ok when the pods cannot use the storage (the job would fail at its first checkpoint)."""
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
    ok, lines = access_check(settings, client=client)
    if ok:
        result.message = "; ".join([result.message, *lines])
    else:
        result.ok = False
        result.message += ", but the worker pods cannot use the checkpoint storage"
        result.problems += lines
    return result


def location(settings: Settings) -> iam.StorageLocation:
    """The run's storage: 02's record, else computed from the settings and this AWS account."""
    rec = storage.load_record(settings)
    if rec:
        return iam.StorageLocation(rec["bucket"], rec["prefix"])
    sess = aws_client.session(settings.aws.region)
    return iam.storage_location(settings, aws_client.identity(sess, settings.aws.region).account)


def access_check(settings: Settings, *, client=None) -> tuple[bool, list[str]]:
    """Write, list, read and delete a marker object under the prefix from every Running worker pod; returns
    (ok, lines), a failure naming the permission that is missing."""
    try:
        loc = location(settings)
    except (ConfigError, aws_client.AwsError) as e:
        return False, [f"checkpoint storage unknown: {e}. Fix: run notebook 02 (cluster up) first"]
    prefix = f"{loc.prefix}/{storage.MARKER_DIR}"
    with kube.using_client(settings, client) as api:
        pods = [
            p
            for p in kuberay.cluster_pods(api, settings)
            if kuberay.pod_role(p) == "worker" and phase_of(p) == "Running"
        ]
        if not pods:
            return False, ["no Running worker pod to check the storage from. Fix: see the pods above"]
        results = [(name_of(p), _check_in(api, settings, name_of(p), loc.bucket, prefix)) for p in pods]
    failed = [(pod, steps) for pod, steps in results if not steps or not steps[-1]["ok"] or len(steps) < 5]
    if not failed:
        who = results[0][1][0].get("message", "")
        return True, [
            f"storage access from {len(results)} worker pod(s): put, list, get, delete of a marker under "
            f"{loc.uri}/{storage.MARKER_DIR}/ OK" + (f" (as {_role_of(who)})" if who else "")
        ]
    return False, [_failure(pod, steps, loc, settings) for pod, steps in failed]


def _role_of(arn: str) -> str:
    """``arn:aws:sts::1:assumed-role/ROLE/session`` -> ``ROLE``; other ARNs as they are."""
    parts = arn.split(":assumed-role/", 1)
    return parts[1].split("/", 1)[0] if len(parts) == 2 else arn


def _check_in(api, settings: Settings, pod: str, bucket: str, prefix: str) -> list[dict[str, Any]]:
    argv = ["python3", "-c", ACCESS_CHECK, bucket, prefix, pod]
    try:
        out = kube.exec_in_pod(settings, pod, argv, client=api, timeout_s=90)
    except kube.ExecError as e:
        text = (e.stderr or e.stdout or str(e)).strip().splitlines()
        return [
            {"action": "exec python3", "ok": False, "code": f"exit {e.returncode}", "message": text[-1] if text else ""}
        ]
    except kube.K8sError as e:
        return [{"action": "exec", "ok": False, "code": "K8sError", "message": str(e)}]
    steps = []
    for line in out.splitlines():
        try:
            steps.append(json.loads(line))
        except ValueError:
            continue
    return steps


def _failure(pod: str, steps: list[dict[str, Any]], loc: iam.StorageLocation, settings: Settings) -> str:
    k = settings.kubernetes
    if not steps:
        return f"worker pod {pod}: the storage check printed nothing"
    last = steps[-1]
    action, code = last.get("action", "?"), last.get("code", "")
    who = next((s.get("message") for s in steps if s.get("action") == "sts:GetCallerIdentity" and s.get("ok")), "")
    head = f"worker pod {pod}: {action} on {loc.uri}/ failed ({code})"
    if action == "sts:GetCallerIdentity" or code in ("NoCredentialsError", "CredentialRetrievalError"):
        return (
            f"{head}: the pod has no AWS identity. Fix: the ServiceAccount {k.namespace}/{k.service_account} needs "
            f"its pod identity association (or IRSA annotation): re-run notebook 02 (cluster up), then 04"
        )
    if code in ("AccessDenied", "Forbidden", "403"):
        return (
            f"{head} as {_role_of(who) or 'the pod identity'}: the permission {action} on "
            f"{loc.objects_arn if action != 's3:ListBucket' else loc.bucket_arn} is missing. Fix: re-run notebook 02 "
            f"(cluster up), which restores the storage role's policy"
        )
    if code in ("NoSuchBucket", "404"):
        return f"{head}: bucket {loc.bucket} does not exist. Fix: re-run notebook 02 (cluster up)"
    return f"{head}: {last.get('message', '')}"


# ==============================================================================================================
# Step 06: the latest checkpoint's objects in the bucket
# ==============================================================================================================


def infra_criteria(settings: Settings, *, client=None) -> list[tuple[str, bool | None, str]]:
    """06 on aws: the Kubernetes rows of :func:`kuberay.infra_criteria`, then :func:`checkpoint_row`."""
    return [*kuberay.infra_criteria(settings, client=client), checkpoint_row(settings)]


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
    bucket, _ = iam.parse_s3_uri(storage_path)
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
    "ACCESS_CHECK",
    "INFRA_CHECKPOINT",
    "access_check",
    "checkpoint_row",
    "infra_criteria",
    "location",
    "raycluster",
]
