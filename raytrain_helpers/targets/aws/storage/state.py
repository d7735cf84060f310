"""Checkpoint storage on the ``aws`` target, as it is now: the S3 bucket, the storage role, the Pod Identity
association and the cluster's OIDC issuer, read before deciding (:func:`read_state`: nothing is changed while
reading); and the record step 02 leaves for step 04 (how the ServiceAccount is annotated, where the marker goes).

Step 02 creates what is missing (:mod:`.storage`), step 08 removes what the tutorial created
(:mod:`.storage_teardown`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ....clients import aws as aws_client
from ....core.config import ConfigError, Settings
from ....core.paths import runs_dir
from ....plan import iam
from .. import common, ownership

#: Every AWS resource the storage modules create carries ``TAG_KEY = <cluster name>``.
TAG_KEY = common.TAG_KEY
#: The state of a bucket.
ABSENT, OURS, ACCOUNTS = "absent", "created by the tutorial", "this account's, not the tutorial's"


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
    return (OURS if ownership.owned(tags, settings) else ACCOUNTS), region


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
    st.role = get_role(aws_client.client(sess, "iam", region), st.role_name)
    if st.role is not None and not ownership.owned(aws_client.tags_of(st.role), settings):
        st.problems.append(
            f"IAM role {st.role_name} exists but was not created by the tutorial for cluster "
            f"{settings.aws.cluster_name} (no tag {TAG_KEY}={settings.aws.cluster_name}); it is left alone. Fix: "
            f"delete it, or choose another kubernetes.service_account"
        )
    if cluster is not None:
        st.oidc_issuer = ((cluster.get("identity") or {}).get("oidc") or {}).get("issuer", "")
        if st.mode == "pod-identity":
            st.association = find_association(eks, settings)
        if st.association is not None and not ownership.owned(st.association.get("tags"), settings):
            k = settings.kubernetes
            st.problems.append(
                ownership.not_ours(
                    f"the Pod Identity association of ServiceAccount {k.namespace}/{k.service_account} (role "
                    f"{st.association.get('roleArn')})",
                    settings,
                )
                + ": it is not re-pointed at the tutorial's role. Fix: choose another kubernetes.service_account "
                "(or kubernetes.namespace), or delete that association if it is yours to delete"
            )
    if settings.aws.storage_per_namespace and st.mode != "pod-identity":
        st.problems.append(
            f"aws.storage_per_namespace = true needs EKS Pod Identity's session tags, but cluster "
            f"{settings.aws.cluster_name} runs without the {iam.POD_IDENTITY_ADDON} add-on (pod_identity = auto "
            f"chose irsa). Fix: `eksctl create addon --cluster {settings.aws.cluster_name} --name "
            f"{iam.POD_IDENTITY_ADDON}`, or storage_per_namespace: false"
        )
    if cluster is not None and settings.aws.pod_identity == "pod-identity" and not _has_agent(eks, cluster["name"]):
        st.problems.append(
            f"aws.pod_identity = pod-identity but cluster {settings.aws.cluster_name} has no "
            f"{iam.POD_IDENTITY_ADDON} add-on. Fix: `eksctl create addon --cluster {settings.aws.cluster_name} "
            f"--name {iam.POD_IDENTITY_ADDON}`, or pod_identity: irsa (or auto)"
        )
    return st


def get_role(iam_api, name: str) -> dict[str, Any] | None:
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


def find_association(eks, settings: Settings, *, guarded: bool = True) -> dict[str, Any] | None:
    """The Pod Identity association of the namespace/service account (described: with its roleArn), or None;
    ``guarded=False``: botocore's errors propagate as they are (:func:`..clients.aws.pages`)."""
    k = settings.kubernetes
    found = (aws_client.paginate if guarded else aws_client.pages)(
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


__all__ = [
    "ABSENT",
    "ACCOUNTS",
    "OURS",
    "TAG_KEY",
    "StorageState",
    "bucket_state",
    "denied",
    "find_association",
    "get_role",
    "load_record",
    "read_state",
    "record_path",
    "resolve_mode",
    "save_record",
    "service_account",
]
