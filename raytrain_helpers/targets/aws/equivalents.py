"""What step 02 creates on AWS, as the commands a person would type: ``eksctl``, ``aws s3api``, ``aws iam``,
``aws eks create-pod-identity-association`` and ``kubectl apply`` - each with exactly the parameters the tutorial
passes to boto3 (:mod:`.storage`, :mod:`.eks`), the policies and configs as the files ``raytrain-tutorial render
--out DIR`` writes (:func:`raytrain_helpers.plan.manifests.aws_documents`).

Shown by notebooks 02 and 08 next to the artifacts, so a learner can read (or replay) each step without the
tutorial. Nothing here runs a command or calls AWS. Structured values are JSON, which the AWS CLI accepts for
every structure parameter; the CLI's parameter names are the API's member names in kebab case (botocore's
``xform_name``), which the tests check against botocore's own service models.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from ...core.settings import Settings
from ...plan import iam
from ...plan.manifests import PLACEHOLDERS, aws_storage_settings
from .storage import bucket as storage


@dataclass(frozen=True)
class Equivalent:
    """One thing the tutorial creates (or deletes) and the command that does the same."""

    what: str
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


def _j(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _storage_equivalents(settings: Settings, account: str) -> list[Equivalent]:
    a, region = settings.aws, settings.aws.region
    loc = iam.storage_location(settings, account)
    tags = [{"Key": k, "Value": v} for k, v in {storage.TAG_KEY: a.cluster_name}.items()]
    create = ["aws", "s3api", "create-bucket", "--bucket", loc.bucket, "--region", region]
    if region != "us-east-1":  # S3 refuses a LocationConstraint of us-east-1 (storage._ensure_bucket)
        create += ["--create-bucket-configuration", _j({"LocationConstraint": region})]
    rule = {
        "ID": storage.LIFECYCLE_RULE_ID,
        "Status": "Enabled",
        "Filter": {"Prefix": ""},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": storage.ABORT_MULTIPART_DAYS},
    }
    sse = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}
    bucket = ["--bucket", loc.bucket]
    out = [
        Equivalent(f"S3 bucket {loc.bucket} (when it does not exist yet)", tuple(create)),
        Equivalent("its tag", ("aws", "s3api", "put-bucket-tagging", *bucket, "--tagging", _j({"TagSet": tags}))),
        Equivalent(
            "public access blocked",
            (
                "aws",
                "s3api",
                "put-public-access-block",
                *bucket,
                "--public-access-block-configuration",
                _j(storage.PUBLIC_ACCESS_BLOCK),
            ),
        ),  # fmt: skip
        Equivalent(
            "SSE-S3 by default",
            ("aws", "s3api", "put-bucket-encryption", *bucket, "--server-side-encryption-configuration", _j(sse)),
        ),
        Equivalent(
            "incomplete uploads aborted",
            (
                "aws",
                "s3api",
                "put-bucket-lifecycle-configuration",
                *bucket,
                "--lifecycle-configuration",
                _j({"Rules": [rule]}),
            ),
        ),  # fmt: skip
    ]
    return out


def _role_equivalents(settings: Settings, docs: str, account: str) -> list[Equivalent]:
    a, k, role = settings.aws, settings.kubernetes, iam.role_name(settings)
    loc = iam.storage_location(settings, account)
    out = [
        Equivalent(
            f"IAM role {role}",
            (
                "aws",
                "iam",
                "create-role",
                "--role-name",
                role,
                "--assume-role-policy-document",
                f"file://{docs}/iam/storage-role-trust-policy.json",
                "--tags",
                _j([{"Key": storage.TAG_KEY, "Value": a.cluster_name}]),
                "--description",  # last: the longest word, on a line of its own when shown wrapped
                f"raytrain-tutorial: checkpoints of {a.cluster_name} in {loc.uri}",
            ),
        ),  # fmt: skip
        Equivalent(
            f"its permission policy {iam.POLICY_NAME}",
            (
                "aws",
                "iam",
                "put-role-policy",
                "--role-name",
                role,
                "--policy-name",
                iam.POLICY_NAME,
                "--policy-document",
                f"file://{docs}/iam/storage-role-permission-policy.json",
            ),
        ),  # fmt: skip
    ]
    if a.pod_identity != "irsa":
        out.append(
            Equivalent(
                f"Pod Identity association {k.namespace}/{k.service_account} -> {role}",
                (
                    "aws",
                    "eks",
                    "create-pod-identity-association",
                    "--region",
                    a.region,
                    "--cluster-name",
                    a.cluster_name,
                    "--namespace",
                    k.namespace,
                    "--service-account",
                    k.service_account,
                    "--role-arn",
                    f"arn:aws:iam::{account}:role/{role}",
                    "--tags",
                    _j({storage.TAG_KEY: a.cluster_name}),
                ),
            )  # fmt: skip
        )
    return out


def cli_equivalents(
    settings: Settings, *, docs: str = "DIR", account: str = PLACEHOLDERS["account"]
) -> list[Equivalent]:
    """The commands that create what step 02 (and 03/04 through ``kubectl apply``) creates, in order; ``docs``:
    the folder ``raytrain-tutorial render --out`` wrote; ``account``: the account id (a placeholder by default).
    Step 02 creates the bucket only when it does not exist, and sets it up only when the tutorial created it."""
    settings = aws_storage_settings(settings)
    a = settings.aws
    out = [
        Equivalent("EKS cluster, VPC, system node group", ("eksctl", "create", "cluster", "-f",
                                                          f"{docs}/eksctl/cluster.yaml")),
    ]  # fmt: skip
    out += _storage_equivalents(settings, account) + _role_equivalents(settings, docs, account)
    # Last, once the storage check passed from the system node (02's order: no GPU hour before it).
    out.append(
        Equivalent(
            f"GPU node group {a.gpu_nodegroup_name} (EFA)",
            ("eksctl", "create", "nodegroup", "-f", f"{docs}/eksctl/gpu-nodegroup.yaml",
             "--install-nvidia-plugin=false"),
        )
    )  # fmt: skip
    out.append(
        Equivalent(
            "device plugins (NVIDIA, EFA), KubeRay operator, namespace, ServiceAccount, RayCluster",
            ("kubectl", "apply", "--server-side", "-f", docs),
        )
    )
    return out


def teardown_equivalents(
    settings: Settings, *, docs: str = "DIR", account: str = PLACEHOLDERS["account"]
) -> list[Equivalent]:
    """The commands that remove what the tutorial created, in step 08's order (the bucket only when the tutorial
    created it; ``ASSOCIATION_ID`` is what ``list-pod-identity-associations`` answers)."""
    settings = aws_storage_settings(settings)
    a, k, role = settings.aws, settings.kubernetes, iam.role_name(settings)
    loc = iam.storage_location(settings, account)
    cluster = ["--cluster-name", a.cluster_name, "--region", a.region]
    out = [Equivalent("the Kubernetes objects", ("kubectl", "delete", "--ignore-not-found", "-f", docs))]
    if a.pod_identity != "irsa":
        out += [
            Equivalent(
                "find the Pod Identity association",
                ("aws", "eks", "list-pod-identity-associations", *cluster, "--namespace", k.namespace,
                 "--service-account", k.service_account),
            ),
            Equivalent(
                "delete it",
                ("aws", "eks", "delete-pod-identity-association", *cluster, "--association-id", "ASSOCIATION_ID"),
            ),
        ]  # fmt: skip
    out += [
        Equivalent(
            "the role's policy",
            ("aws", "iam", "delete-role-policy", "--role-name", role, "--policy-name", iam.POLICY_NAME),
        ),
        Equivalent(f"IAM role {role}", ("aws", "iam", "delete-role", "--role-name", role)),
        Equivalent(f"S3 bucket {loc.bucket} and its objects (only if the tutorial created it)",
                   ("aws", "s3", "rb", f"s3://{loc.bucket}", "--force")),
        Equivalent(f"GPU node group {a.gpu_nodegroup_name}",
                   ("eksctl", "delete", "nodegroup", "--cluster", a.cluster_name, "--name", a.gpu_nodegroup_name,
                    "--region", a.region, "--wait")),
        Equivalent("the cluster, its node groups and VPC",
                   ("eksctl", "delete", "cluster", "--name", a.cluster_name, "--region", a.region, "--wait")),
    ]  # fmt: skip
    return out


def show(
    settings: Settings, *, docs: str = "DIR", account: str = PLACEHOLDERS["account"], teardown: bool = False
) -> None:
    """Print :func:`cli_equivalents` (``teardown``: :func:`teardown_equivalents`) as a commented shell script."""
    which = teardown_equivalents if teardown else cli_equivalents
    for e in which(settings, docs=docs, account=account):
        print(f"# {e.what}\n{e.command}")


__all__ = ["Equivalent", "cli_equivalents", "show", "teardown_equivalents"]
