"""Checkpoint storage and pod identity on the ``aws`` target: the S3 bucket, the storage role, its binding to
the Ray pods' ServiceAccount, the in-pod access check, 06's checkpoint row and the teardown.

* Step 02 (:func:`ensure`, :func:`plan`, here): one S3 bucket for the run's storage (public access blocked, SSE-S3
  encryption, requests without TLS denied, incomplete multipart uploads aborted after a day), created when missing,
  reused when this account owns it, refused when another account does; one IAM role with least privilege on the
  bucket prefix (``plan.iam``), bound to ``kubernetes.service_account`` by an EKS Pod Identity association (or
  IRSA's trust on the cluster's OIDC provider). Everything created is tagged ``raytrain-tutorial=<cluster>``; a
  second run reads the state (:mod:`.storage_state`) and creates nothing.
* Step 04: :func:`service_account` (:mod:`.storage_state`, from 02's record) is applied before the RayCluster
  (``targets.aws.storage.identity`` then checks the access from inside the worker pods, and lists 06's checkpoint row).
* Step 08 (:func:`teardown`, :mod:`.storage_teardown`): the association and the role; the bucket with its objects
  only when the tutorial created it (its tag); what is kept is listed with the reason.

Every name of :mod:`.storage_state` and :mod:`.storage_teardown` is importable from here too.
"""

from __future__ import annotations

import json
from typing import Any

from ....clients import aws as aws_client
from ....core.config import ConfigError, Settings
from ....plan import iam
from .. import common, ownership
from .state import (
    ABSENT,
    ACCOUNTS,
    OURS,
    TAG_KEY,
    StorageState,
    bucket_state,
    denied,
    find_association,
    load_record,
    read_state,
    record_path,
    resolve_mode,
    save_record,
    service_account,
)
from .teardown import StorageTeardown, empty_bucket, show_kept, teardown, teardown_rows

#: Where the in-pod access check writes its marker, under the prefix.
MARKER_DIR = ".raytrain-access-check"
#: The incomplete multipart uploads the bucket's lifecycle rule aborts, after this many days.
ABORT_MULTIPART_DAYS = 1
LIFECYCLE_RULE_ID = "raytrain-abort-incomplete-multipart-uploads"
PUBLIC_ACCESS_BLOCK = {
    "BlockPublicAcls": True,
    "IgnorePublicAcls": True,
    "BlockPublicPolicy": True,
    "RestrictPublicBuckets": True,
}


def _tags(settings: Settings) -> dict[str, str]:
    return ownership.tags(settings)


# ==============================================================================================================
# Step 02: plan and ensure
# ==============================================================================================================


def policy_documents(settings: Settings, st: StorageState) -> dict[str, dict[str, Any]]:
    """The role's trust and permission policies, by the name 02 shows them under."""
    out = {f"storage role {st.role_name}: permission policy": iam.permission_policy(settings, st.location)}
    if st.mode == "irsa" and not st.oidc_issuer:
        return out  # the trust needs the cluster's OIDC issuer, known once the cluster exists
    trust = iam.trust_policy(settings, st.mode, st.account, st.oidc_issuer)
    return {f"storage role {st.role_name}: trust policy ({st.mode})": trust, **out}


def planned(settings: Settings, st: StorageState) -> list[str]:
    """What :func:`ensure` would do from this state (empty: nothing)."""
    loc, k = st.location, settings.kubernetes
    todo = []
    if st.bucket == ABSENT:
        todo.append(
            f"create S3 bucket {loc.bucket} in {settings.aws.region} (public access blocked, SSE-S3, TLS only, "
            f"incomplete multipart uploads aborted after {ABORT_MULTIPART_DAYS} day), tagged "
            f"{TAG_KEY}={settings.aws.cluster_name}"
        )
    if st.role is None:
        todo.append(f"create IAM role {st.role_name}: {loc.uri}/ objects and listing ({st.mode})")
    if st.mode == "pod-identity" and st.association is None:
        todo.append(
            f"associate {st.role_name} with ServiceAccount {k.namespace}/{k.service_account} (EKS Pod Identity)"
        )
    return todo


def describe(st: StorageState) -> list[str]:
    """Lines for 02's output: where the checkpoints go and how the pods reach them."""
    lines = [
        f"checkpoint storage: {st.location.uri}"
        + (" (bucket name derived from cluster, account and region)" if st.location.derived else ""),
        f"pod identity: {st.mode}, role {st.role_arn}",
    ]
    if st.bucket == ACCOUNTS:
        lines.append(f"bucket {st.location.bucket} is reused as it is: the tutorial did not create it, 08 keeps it")
    return lines


def ensure(
    settings: Settings, sess, ident, cluster: dict[str, Any] | None, *, assume_yes: bool
) -> tuple[list[str], list[str]]:
    """Create what is missing (after one confirmation) and correct the role's policies; returns (done, problems).
    ``cluster``: the ACTIVE cluster (IRSA's trust needs its OIDC issuer; the association needs it)."""
    st = read_state(settings, sess, ident.account, cluster)
    if st.problems:
        return [], st.problems
    todo = planned(settings, st)
    if todo:
        common.confirm(
            f"create checkpoint storage for {settings.aws.cluster_name}", ident, assume_yes=assume_yes, details=todo
        )
    region = settings.aws.region
    done: list[str] = []
    done += _ensure_bucket(settings, aws_client.client(sess, "s3", region), st)
    done += _ensure_role(settings, aws_client.client(sess, "iam", region), st)
    if st.mode == "pod-identity":
        done += _ensure_association(settings, aws_client.client(sess, "eks", region), st)
    save_record(settings, st)
    return done, []


def _ensure_bucket(settings: Settings, s3, st: StorageState) -> list[str]:
    loc = st.location
    if st.bucket == ACCOUNTS:
        return []
    done = []
    if st.bucket == ABSENT:
        kwargs: dict[str, Any] = {"Bucket": loc.bucket}
        if settings.aws.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": settings.aws.region}
        s3.create_bucket(**kwargs)
        s3.put_bucket_tagging(
            Bucket=loc.bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in _tags(settings).items()]}
        )
        done.append(f"created S3 bucket {loc.bucket}")
    done += _bucket_settings(settings, s3, loc.bucket)
    return done


def _bucket_settings(settings: Settings, s3, bucket: str) -> list[str]:
    """Public access blocked, SSE-S3 by default, requests without TLS denied (the bucket policy, its other
    statements kept), the lifecycle rule: each put only when it differs."""
    from botocore.exceptions import ClientError

    done = []

    def read(call, key):
        try:
            return call(Bucket=bucket).get(key)
        except ClientError:
            return None

    if read(s3.get_public_access_block, "PublicAccessBlockConfiguration") != PUBLIC_ACCESS_BLOCK:
        s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=dict(PUBLIC_ACCESS_BLOCK))
        done.append(f"blocked public access to {bucket}")
    rules = (read(s3.get_bucket_encryption, "ServerSideEncryptionConfiguration") or {}).get("Rules") or []
    if not any((r.get("ApplyServerSideEncryptionByDefault") or {}).get("SSEAlgorithm") for r in rules):
        s3.put_bucket_encryption(
            Bucket=bucket,
            ServerSideEncryptionConfiguration={
                "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
        )
        done.append(f"default encryption SSE-S3 on {bucket}")
    policy = iam.with_bucket_policy(settings, _doc(read(s3.get_bucket_policy, "Policy")), bucket)
    if policy is not None:
        s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
        done.append(f"bucket policy on {bucket}: requests without TLS denied")
    lifecycle = read(s3.get_bucket_lifecycle_configuration, "Rules") or []
    if not any(r.get("ID") == LIFECYCLE_RULE_ID for r in lifecycle):
        rule = {
            "ID": LIFECYCLE_RULE_ID,
            "Status": "Enabled",
            "Filter": {"Prefix": ""},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_MULTIPART_DAYS},
        }
        others = [r for r in lifecycle if r.get("ID") != LIFECYCLE_RULE_ID]
        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": others + [rule]})
        done.append(f"lifecycle rule on {bucket}: abort incomplete multipart uploads after {ABORT_MULTIPART_DAYS} day")
    return done


def _ensure_role(settings: Settings, iam_api, st: StorageState) -> list[str]:
    docs = policy_documents(settings, st)
    trust = next((d for n, d in docs.items() if "trust" in n), None)
    permissions = iam.permission_policy(settings, st.location)
    problems = iam.policy_problems(
        permissions, iam.policy_location(settings, st.location), iam.principal_tags(settings)
    )
    if problems:  # the templates are the product: never create a role beyond least privilege
        raise ConfigError("the storage role's permission policy is not least privilege: " + "; ".join(problems))
    if trust is None:
        raise ConfigError(
            f"cluster {settings.aws.cluster_name} has no OIDC issuer for IRSA. Fix: pod_identity: pod-identity"
        )
    done = []
    if st.role is None:
        iam_api.create_role(
            RoleName=st.role_name,
            AssumeRolePolicyDocument=json.dumps(trust),
            Description=f"raytrain-tutorial: checkpoints of {settings.aws.cluster_name} in {st.location.uri}",
            Tags=[{"Key": k, "Value": v} for k, v in _tags(settings).items()],
        )
        done.append(f"created IAM role {st.role_name} ({st.mode})")
    elif _doc(st.role.get("AssumeRolePolicyDocument")) != trust:
        iam_api.update_assume_role_policy(RoleName=st.role_name, PolicyDocument=json.dumps(trust))
        done.append(f"updated the trust policy of {st.role_name} ({st.mode})")
    if _inline_policy(iam_api, st.role_name) != permissions:
        iam_api.put_role_policy(
            RoleName=st.role_name, PolicyName=iam.POLICY_NAME, PolicyDocument=json.dumps(permissions)
        )
        done.append(f"policy {iam.POLICY_NAME} on {st.role_name}: {st.location.uri}/ objects and listing")
    return done


def _doc(value: Any) -> Any:
    """A policy document as IAM returns it (a dict, or URL-encoded JSON text)."""
    if isinstance(value, str):
        from urllib.parse import unquote

        return json.loads(unquote(value))
    return value


def _inline_policy(iam_api, role: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        return _doc(iam_api.get_role_policy(RoleName=role, PolicyName=iam.POLICY_NAME)["PolicyDocument"])
    except ClientError as e:
        if aws_client.err_code(e) == "NoSuchEntity":
            return None
        raise


def _ensure_association(settings: Settings, eks, st: StorageState) -> list[str]:
    k = settings.kubernetes
    if st.association is None:
        eks.create_pod_identity_association(
            clusterName=settings.aws.cluster_name,
            namespace=k.namespace,
            serviceAccount=k.service_account,
            roleArn=st.role_arn,
            tags=_tags(settings),
        )
        return [f"associated {st.role_name} with ServiceAccount {k.namespace}/{k.service_account} (EKS Pod Identity)"]
    if st.association.get("roleArn") != st.role_arn:
        eks.update_pod_identity_association(
            clusterName=settings.aws.cluster_name, associationId=st.association["associationId"], roleArn=st.role_arn
        )
        return [f"pointed the association of {k.namespace}/{k.service_account} at {st.role_name}"]
    return []


def plan_into(res, settings: Settings, sess, ident, cluster: dict[str, Any] | None) -> StorageState | None:
    """02 (``plan`` and before ``up`` acts): read the storage state into the cluster step's result ``res`` - the
    policies under ``configs``, what would be created under ``actions``, where and how under ``notes``; a bucket of
    another account (or any reason to stop) under ``problems``. Creates nothing."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        st = read_state(settings, sess, ident.account, cluster)
    except ConfigError as e:
        res.problems.append(str(e))
        return None
    except (ClientError, BotoCoreError, aws_client.AwsCallError) as e:
        res.problems.append(denied("reading the checkpoint storage", e))
        return None
    for name, doc in policy_documents(settings, st).items():
        res.configs[name] = json.dumps(doc, indent=2)
    res.actions += planned(settings, st)
    res.notes += describe(st)
    res.problems += st.problems
    return st


def up_into(res, settings: Settings, sess, ident, cluster: dict[str, Any], *, assume_yes: bool) -> None:
    """02 ``up``, once the cluster is ACTIVE: :func:`ensure`, what was done appended to ``res.actions``."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        done, problems = ensure(settings, sess, ident, cluster, assume_yes=assume_yes)
    except ConfigError as e:
        res.problems.append(str(e))
        return
    except (ClientError, BotoCoreError, aws_client.AwsCallError) as e:
        res.problems.append(denied("creating the checkpoint storage", e))
        return
    res.actions += done
    res.problems += problems


__all__ = [
    "ABORT_MULTIPART_DAYS",
    "ABSENT",
    "ACCOUNTS",
    "LIFECYCLE_RULE_ID",
    "MARKER_DIR",
    "OURS",
    "PUBLIC_ACCESS_BLOCK",
    "TAG_KEY",
    "StorageState",
    "StorageTeardown",
    "bucket_state",
    "describe",
    "empty_bucket",
    "denied",
    "ensure",
    "find_association",
    "load_record",
    "plan_into",
    "planned",
    "policy_documents",
    "read_state",
    "record_path",
    "resolve_mode",
    "save_record",
    "service_account",
    "show_kept",
    "teardown",
    "teardown_rows",
    "up_into",
]
