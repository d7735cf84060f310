"""Step 08 on the ``aws`` target's checkpoint storage (:func:`teardown`): the Pod Identity association and the
storage role; the bucket with its objects only when the tutorial created it (its tag); what is kept is listed
with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ....clients import aws as aws_client
from ....core.config import ConfigError, Settings
from ....plan import iam
from .. import ownership
from .state import ABSENT, ACCOUNTS, TAG_KEY, bucket_state, denied, find_association, get_role, load_record

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


def model_export(settings: Settings, account: str = "ACCOUNT") -> str:
    """Where the run's job exported the trained model (``<storage>/<run>/model``, as ``steps.train.export_path``
    writes it on aws): 02's record, else the storage the settings name (``account`` fills a derived bucket name)."""
    rec = load_record(settings)
    if rec and rec.get("bucket"):
        uri = f"s3://{rec['bucket']}/{rec['prefix']}"
    else:
        try:
            uri = iam.storage_location(settings, account).uri
        except ConfigError:
            return ""
    return f"{uri.rstrip('/')}/{settings.run_name}/model"


def model_copy_note(settings: Settings, account: str = "ACCOUNT") -> str:
    """The warning 08 gives before it deletes the tutorial's bucket: the exported model is in it, and the command
    that copies the model out first."""
    model = model_export(settings, account)
    if not model:
        return ""
    return (
        f"the S3 bucket the tutorial created goes with every object in it, the exported model included ({model}): "
        f"copy the model out first with `aws s3 sync {model} ./model`"
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
        if assoc is not None and ownership.owned(assoc.get("tags"), settings):
            eks.delete_pod_identity_association(
                clusterName=settings.aws.cluster_name, associationId=assoc["associationId"]
            )
            evidence.append("association deleted")
        elif assoc is not None:
            k = settings.kubernetes
            out.kept.append(
                ownership.not_ours(f"Pod Identity association of {k.namespace}/{k.service_account}", settings)
            )
            evidence.append("association kept (not the tutorial's)")
    role = get_role(iam_api, iam.role_name(settings))
    if role is not None and ownership.owned(aws_client.tags_of(role), settings):
        _delete_role(iam_api, role["RoleName"])
        evidence.append(f"role {role['RoleName']} deleted")
    elif role is not None:
        out.kept.append(ownership.not_ours(f"IAM role {role['RoleName']}", settings))
        evidence.append(f"role {role['RoleName']} kept (not the tutorial's)")
    left = get_role(iam_api, iam.role_name(settings)) is not None and role is not None and not out.kept
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
    print(
        f"S3 bucket {loc.bucket}: deleting it with every object version, the exported model "
        f"{model_export(settings, account)} included"
    )
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
    "StorageTeardown",
    "empty_bucket",
    "model_copy_note",
    "model_export",
    "show_kept",
    "teardown",
    "teardown_rows",
]
