"""Checkpoint storage and pod identity on the ``aws`` target: the S3 bucket, the storage role, its binding to
the Ray pods' ServiceAccount, the in-pod access check, 06's checkpoint row and the teardown.

* Step 02 (:func:`ensure`, :func:`plan`): one S3 bucket for the run's storage (public access blocked, SSE-S3
  encryption, incomplete multipart uploads aborted after a day), created when missing, reused when this account
  owns it, refused when another account does; one IAM role with least privilege on the bucket prefix
  (``plan.iam``), bound to ``kubernetes.service_account`` by an EKS Pod Identity association (or IRSA's trust
  on the cluster's OIDC provider). Everything created is tagged ``raytrain-tutorial=<cluster>``; a second run
  reads the state and creates nothing.
* Step 04: :func:`service_account` is applied before the RayCluster (``targets.aws.identity`` then checks the
  access from inside the worker pods, and lists 06's checkpoint row).
* Step 08 (:func:`teardown`): the association and the role; the bucket with its objects only when the
  tutorial created it (its tag); what is kept is listed with the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clients import aws as aws_client
from ...core.config import ConfigError, Settings
from ...core.paths import runs_dir
from ...plan import iam
from . import common

#: Every AWS resource this module creates carries ``TAG_KEY = <cluster name>``.
TAG_KEY = common.TAG_KEY
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
#: The state of a bucket.
ABSENT, OURS, ACCOUNTS = "absent", "created by the tutorial", "this account's, not the tutorial's"


def _tags(settings: Settings) -> dict[str, str]:
    return {TAG_KEY: settings.aws.cluster_name}


# ==============================================================================================================
# Reading the state
# ==============================================================================================================


@dataclass
class StorageState:
    """What exists now, read before deciding (nothing is changed while reading)."""

    location: iam.StorageLocation
    account: str
    mode: str
    role_name: str
    bucket: str = ABSENT
    bucket_region: str = ""
    role: dict[str, Any] | None = None
    association: dict[str, Any] | None = None
    oidc_issuer: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def role_arn(self) -> str:
        return f"arn:aws:iam::{self.account}:role/{self.role_name}"


def bucket_state(s3, bucket: str, account: str, settings: Settings) -> tuple[str, str]:
    """(ABSENT | OURS | ACCOUNTS, region) of a bucket; ConfigError naming the setting when another account owns
    it (HeadBucket with ExpectedBucketOwner answers 403) or it lives in another region."""
    from botocore.exceptions import ClientError

    try:
        head = s3.head_bucket(Bucket=bucket, ExpectedBucketOwner=account)
    except ClientError as e:
        code = aws_client.err_code(e)
        if code in ("404", "NoSuchBucket", "NotFound"):
            return ABSENT, ""
        if code in ("403", "AccessDenied", "Forbidden"):
            raise ConfigError(
                f"S3 bucket {bucket!r} exists but is not owned by account {account} (or this identity may not "
                f"read it): checkpoints are never written to another account's bucket. Fix: set aws.storage_bucket "
                f"(or the bucket of train.storage_path) to a bucket of account {account}, or leave both empty"
            ) from None
        raise
    region = (head.get("ResponseMetadata", {}).get("HTTPHeaders") or {}).get("x-amz-bucket-region", "")
    if region and region != settings.aws.region:
        raise ConfigError(
            f"S3 bucket {bucket!r} is in {region}, the cluster in {settings.aws.region} (every checkpoint would "
            f"cross regions). Fix: set aws.storage_bucket to a bucket in {settings.aws.region}, or leave it empty"
        )
    try:
        tags = {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=bucket).get("TagSet", [])}
    except ClientError as e:
        if aws_client.err_code(e) not in ("NoSuchTagSet", "NoSuchTagSetError"):
            raise
        tags = {}
    return (OURS if tags.get(TAG_KEY) == settings.aws.cluster_name else ACCOUNTS), region


def resolve_mode(settings: Settings, eks, cluster: dict[str, Any] | None) -> str:
    """``pod-identity`` or ``irsa``: the setting, or for ``auto`` Pod Identity unless an existing cluster runs
    without the eks-pod-identity-agent add-on (step 02's ClusterConfig installs it on a new cluster)."""
    wanted = settings.aws.pod_identity
    if wanted != "auto":
        return wanted
    if cluster is None:
        return "pod-identity"
    return "pod-identity" if _has_agent(eks, settings.aws.cluster_name) else "irsa"


def _has_agent(eks, cluster_name: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        eks.describe_addon(clusterName=cluster_name, addonName=iam.POD_IDENTITY_ADDON)
    except ClientError as e:
        if aws_client.err_code(e) == "ResourceNotFoundException":
            return False
        raise
    return True


def read_state(settings: Settings, sess, account: str, cluster: dict[str, Any] | None) -> StorageState:
    """The bucket, the role, the association and the OIDC issuer as they are now."""
    region = settings.aws.region
    eks = aws_client.client(sess, "eks", region)
    st = StorageState(
        location=iam.storage_location(settings, account),
        account=account,
        mode=resolve_mode(settings, eks, cluster),
        role_name=iam.role_name(settings),
    )
    st.bucket, st.bucket_region = bucket_state(
        aws_client.client(sess, "s3", region), st.location.bucket, account, settings
    )
    st.role = _get_role(aws_client.client(sess, "iam", region), st.role_name)
    if st.role is not None and aws_client.tags_of(st.role).get(TAG_KEY) != settings.aws.cluster_name:
        st.problems.append(
            f"IAM role {st.role_name} exists but was not created by the tutorial for cluster "
            f"{settings.aws.cluster_name} (no tag {TAG_KEY}={settings.aws.cluster_name}); it is left alone. Fix: "
            f"delete it, or choose another kubernetes.service_account"
        )
    if cluster is not None:
        st.oidc_issuer = ((cluster.get("identity") or {}).get("oidc") or {}).get("issuer", "")
        if st.mode == "pod-identity":
            st.association = find_association(eks, settings)
    if cluster is not None and settings.aws.pod_identity == "pod-identity" and not _has_agent(eks, cluster["name"]):
        st.problems.append(
            f"aws.pod_identity = pod-identity but cluster {settings.aws.cluster_name} has no "
            f"{iam.POD_IDENTITY_ADDON} add-on. Fix: `eksctl create addon --cluster {settings.aws.cluster_name} "
            f"--name {iam.POD_IDENTITY_ADDON}`, or pod_identity: irsa (or auto)"
        )
    return st


def _get_role(iam_api, name: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        role = iam_api.get_role(RoleName=name)["Role"]
    except ClientError as e:
        if aws_client.err_code(e) == "NoSuchEntity":
            return None
        raise
    if "Tags" not in role:
        role["Tags"] = iam_api.list_role_tags(RoleName=name).get("Tags", [])
    return role


def find_association(eks, settings: Settings) -> dict[str, Any] | None:
    """The Pod Identity association of the namespace/service account (described: with its roleArn), or None."""
    k = settings.kubernetes
    found = aws_client.paginate(
        eks,
        "list_pod_identity_associations",
        "associations",
        clusterName=settings.aws.cluster_name,
        namespace=k.namespace,
        serviceAccount=k.service_account,
    )
    if not found:
        return None
    return eks.describe_pod_identity_association(
        clusterName=settings.aws.cluster_name, associationId=found[0]["associationId"]
    )["association"]


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
            f"create S3 bucket {loc.bucket} in {settings.aws.region} (public access blocked, SSE-S3, incomplete "
            f"multipart uploads aborted after {ABORT_MULTIPART_DAYS} day), tagged {TAG_KEY}={settings.aws.cluster_name}"
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
    done += _bucket_settings(s3, loc.bucket)
    return done


def _bucket_settings(s3, bucket: str) -> list[str]:
    """Public access blocked, SSE-S3 by default, the lifecycle rule: each put only when it differs."""
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
    problems = iam.policy_problems(permissions, st.location)
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


def denied(what: str, e: Exception) -> str:
    """A failed AWS call while preparing the storage, with the permission it needed when AWS names it."""
    if isinstance(e, aws_client.AwsCallError):  # already one line naming the API, the IAM action and the fix
        return f"{what}: {e}"
    op = getattr(e, "operation_name", "") or "?"
    service = {"HeadBucket": "s3:ListBucket"}.get(op, "")
    return (
        f"{what}: {op} failed ({aws_client.err_code(e)}): {aws_client.err_msg(e)}. Fix: the notebook's AWS identity "
        f"needs {service or 'the matching s3:/iam:/eks: permission'} (s3:CreateBucket, s3:PutBucket*, iam:CreateRole, "
        f"iam:PutRolePolicy, eks:CreatePodIdentityAssociation for step 02); re-run `up` afterwards"
    )


# ==============================================================================================================
# The record 04 reads (how the ServiceAccount is annotated, where the marker goes)
# ==============================================================================================================


def record_path(settings: Settings) -> Path:
    return runs_dir(settings) / settings.run_name / "storage.json"


def save_record(settings: Settings, st: StorageState) -> Path:
    p = record_path(settings)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        json.dumps(
            dict(
                cluster=settings.aws.cluster_name,
                namespace=settings.kubernetes.namespace,
                service_account=settings.kubernetes.service_account,
                bucket=st.location.bucket,
                prefix=st.location.prefix,
                mode=st.mode,
                role_arn=st.role_arn,
            ),
            indent=2,
        )
        + "\n"
    )
    return p


def load_record(settings: Settings) -> dict[str, Any] | None:
    """Step 02's record for these settings (None when 02 has not prepared the storage for them)."""
    p = record_path(settings)
    if not p.is_file():
        return None
    rec = json.loads(p.read_text())
    k = settings.kubernetes
    same = (rec.get("cluster"), rec.get("namespace"), rec.get("service_account")) == (
        settings.aws.cluster_name,
        k.namespace,
        k.service_account,
    )
    return rec if same else None


def service_account(settings: Settings) -> dict[str, Any]:
    """The pods' ServiceAccount: annotated with the role under IRSA (from 02's record), plain under Pod Identity."""
    rec = load_record(settings) or {}
    return iam.render_service_account(settings, rec.get("role_arn", "") if rec.get("mode") == "irsa" else "")


# ==============================================================================================================
# Step 08: the association, the role, the bucket (only the tutorial's)
# ==============================================================================================================


@dataclass
class StorageTeardown:
    """What 08 did with the storage: rows (what, gone, evidence) and what it kept on purpose, with the reason."""

    rows: list[tuple[str, bool, str]] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def teardown_rows(settings: Settings) -> tuple[str, str]:
    """The names of 08's two storage rows."""
    k = settings.kubernetes
    return (
        f"storage role {iam.role_name(settings)} and its pod identity association ({k.namespace}/{k.service_account})",
        "S3 checkpoint bucket",
    )


def teardown(settings: Settings, sess, ident, cluster: dict[str, Any] | None) -> StorageTeardown:
    """Delete the association and the role, then the bucket and its objects when the tutorial created it.
    Only called with ``assume_yes`` (08 refuses before anything otherwise). Verified by reading again; a failed
    call becomes a LEFT row naming it (the rest of 08 goes on)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return _teardown(settings, sess, ident, cluster)
    except (ClientError, BotoCoreError, aws_client.AwsCallError) as e:
        return StorageTeardown([(teardown_rows(settings)[0], False, denied("removing the checkpoint storage", e))])


def _teardown(settings: Settings, sess, ident, cluster: dict[str, Any] | None) -> StorageTeardown:
    region = settings.aws.region
    out = StorageTeardown()
    role_row, bucket_row = teardown_rows(settings)
    try:
        loc = iam.storage_location(settings, ident.account)
    except ConfigError as e:
        return StorageTeardown([(role_row, False, str(e))])
    iam_api, eks = aws_client.client(sess, "iam", region), aws_client.client(sess, "eks", region)
    evidence = []
    if cluster is not None:
        assoc = find_association(eks, settings) if _pod_identity_api(eks) else None
        if assoc is not None:
            eks.delete_pod_identity_association(
                clusterName=settings.aws.cluster_name, associationId=assoc["associationId"]
            )
            evidence.append("association deleted")
    role = _get_role(iam_api, iam.role_name(settings))
    if role is not None and aws_client.tags_of(role).get(TAG_KEY) == settings.aws.cluster_name:
        _delete_role(iam_api, role["RoleName"])
        evidence.append(f"role {role['RoleName']} deleted")
    elif role is not None:
        out.kept.append(f"IAM role {role['RoleName']}: not created by the tutorial (no tag {TAG_KEY})")
    left = _get_role(iam_api, iam.role_name(settings)) is not None and role is not None and not out.kept
    out.rows.append((role_row, not left, ("; ".join(evidence) or "absent (nothing to delete)") + ", then checked"))
    out.rows.append(_bucket_teardown(settings, aws_client.client(sess, "s3", region), loc, ident.account, out.kept))
    return out


def _pod_identity_api(eks) -> bool:
    return hasattr(eks, "list_pod_identity_associations")


def _delete_role(iam_api, name: str) -> None:
    for policy in iam_api.list_role_policies(RoleName=name).get("PolicyNames", []):
        iam_api.delete_role_policy(RoleName=name, PolicyName=policy)
    for att in iam_api.list_attached_role_policies(RoleName=name).get("AttachedPolicies", []):
        iam_api.detach_role_policy(RoleName=name, PolicyArn=att["PolicyArn"])
    iam_api.delete_role(RoleName=name)


def _bucket_teardown(settings: Settings, s3, loc: iam.StorageLocation, account: str, kept: list[str]):
    row = f"S3 checkpoint bucket {loc.bucket}"
    try:
        state, _ = bucket_state(s3, loc.bucket, account, settings)
    except ConfigError as e:
        kept.append(f"S3 bucket {loc.bucket}: {e}")
        return row, True, "kept (not this account's)"
    if state == ABSENT:
        return row, True, "absent (nothing to delete)"
    if state == ACCOUNTS:
        kept.append(
            f"S3 bucket {loc.bucket} and its checkpoints: not created by the tutorial (no tag "
            f"{TAG_KEY}={settings.aws.cluster_name}); delete {loc.uri} yourself if you no longer need it"
        )
        return row, True, "kept: not the tutorial's"
    n = empty_bucket(s3, loc.bucket)
    s3.delete_bucket(Bucket=loc.bucket)
    gone = bucket_state(s3, loc.bucket, account, settings)[0] == ABSENT
    return (
        row,
        gone,
        f"{n} object version(s) deleted, bucket deleted, then checked: {'absent' if gone else 'STILL THERE'}",
    )


def empty_bucket(s3, bucket: str) -> int:
    """Delete every object version and delete marker; returns how many."""
    n = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        keys = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        for i in range(0, len(keys), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys[i : i + 1000], "Quiet": True})
        n += len(keys)
    return n


def show_kept(kept: list[str]) -> None:
    for line in kept:
        print(f"kept: {line}")


__all__ = [
    "ABORT_MULTIPART_DAYS",
    "LIFECYCLE_RULE_ID",
    "MARKER_DIR",
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
