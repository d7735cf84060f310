"""The IAM permissions the learner's own identity needs on the aws path, derived from the AWS calls the code makes.

:data:`CALLS` lists every AWS operation the package calls from 01 to 08 (boto3, through ``clients.aws``), as
``<IAM prefix>:<operation>`` (botocore's service model: the signing name and the operation's name). It is checked,
not trusted: ``tests/unit/targets/aws/test_learner_policy.py`` runs the aws path against the fakes with a botocore
``before-call`` hook on every client and fails when the code calls an operation missing here.

:func:`actions` maps each operation to its IAM actions: usually the operation's own name, with the exceptions of
:data:`EXCEPTIONS`, each with the AWS page that says so (the "Permissions" section of the S3 API reference's page
for the operation; the Service Authorization Reference's "dependent actions" for the others).

eksctl creates the cluster and node groups itself, through CloudFormation: its own documentation lists the policies
it needs (:data:`EKSCTL_POLICIES`, eksctl-io/eksctl ``userdocs/src/usage/minimum-iam-policies.md`` @ 09f52817); they
are attached beside :func:`learner_policy`, not merged into it.

Every action that changes or deletes something is allowed only on what the tutorial creates (:data:`SCOPES`: role
names and the tutorial's tag, ``iam:PassedToService``, bucket and stack names); the reads stay on ``*``.

``python -m raytrain_helpers.plan.learner_policy [CLUSTER [BUCKET]]`` prints the policy (the committed
``docs/iam/learner-policy.json`` is the one for the default cluster name and a derived bucket).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

#: Every AWS operation the package calls, by step (``<IAM prefix>:<operation>``).
CALLS: dict[str, tuple[str, ...]] = {
    "01 capacity": (
        "ec2:DescribeRegions",
        "ec2:DescribeAvailabilityZones",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeInstanceTypeOfferings",
        "ec2:DescribeCapacityReservations",
        "ec2:DescribeCapacityBlockOfferings",
        "ec2:GetSpotPlacementScores",
        "ec2:DescribeInstances",
        "servicequotas:GetServiceQuota",
        "servicequotas:GetAWSDefaultServiceQuota",
        "sts:GetCallerIdentity",
    ),
    "01 probe (probe=True, assume_yes)": (
        "ec2:CreateCapacityReservation",
        "ec2:CancelCapacityReservation",
    ),
    "02 cluster up": (
        "eks:DescribeCluster",
        "eks:DescribeNodegroup",
        "eks:ListNodegroups",
        "eks:DescribeAddon",
        "eks:ListPodIdentityAssociations",
        "eks:DescribePodIdentityAssociation",
        "eks:CreatePodIdentityAssociation",
        "eks:UpdatePodIdentityAssociation",
        "cloudformation:ListStacks",
        "cloudformation:DescribeStacks",
        "cloudformation:DescribeStackEvents",
        "cloudformation:UpdateTerminationProtection",
        "cloudformation:DeleteStack",
        "autoscaling:DescribeScalingActivities",
        "ec2:DescribeSubnets",
        "ec2:DescribeNatGateways",
        "ec2:DescribeVpcs",
        "ec2:DescribeRouteTables",
        "s3:HeadBucket",
        "s3:CreateBucket",
        "s3:GetBucketPolicy",
        "s3:PutBucketPolicy",
        "s3:GetBucketTagging",
        "s3:PutBucketTagging",
        "s3:GetPublicAccessBlock",
        "s3:PutPublicAccessBlock",
        "s3:GetBucketEncryption",
        "s3:PutBucketEncryption",
        "s3:GetBucketLifecycleConfiguration",
        "s3:PutBucketLifecycleConfiguration",
        "iam:GetRole",
        "iam:CreateRole",
        "iam:UpdateAssumeRolePolicy",
        "iam:GetRolePolicy",
        "iam:PutRolePolicy",
        "iam:ListRoleTags",
    ),
    "06 verify": ("s3:ListObjectsV2",),
    "08 teardown": (
        "eks:DeletePodIdentityAssociation",
        "iam:ListRolePolicies",
        "iam:ListAttachedRolePolicies",
        "iam:DeleteRolePolicy",
        "iam:DetachRolePolicy",
        "iam:DeleteRole",
        "s3:ListObjectVersions",
        "s3:DeleteObjects",
        "s3:DeleteBucket",
    ),
    "preflight": ("iam:SimulatePrincipalPolicy", "eks:DescribeClusterVersions"),
}

_S3 = "https://docs.aws.amazon.com/AmazonS3/latest/API/API_{}.html"
_SAR = "https://docs.aws.amazon.com/service-authorization/latest/reference/list_{}.html"
#: Operations whose IAM actions are not ``<prefix>:<operation>`` (or not only that), with the page that says so.
EXCEPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "s3:HeadBucket": (("s3:ListBucket",), _S3.format("HeadBucket")),
    "s3:HeadObject": (("s3:GetObject",), _S3.format("HeadObject")),
    "s3:ListObjectsV2": (("s3:ListBucket",), _S3.format("ListObjectsV2")),
    "s3:ListObjects": (("s3:ListBucket",), _S3.format("ListObjects")),
    "s3:ListObjectVersions": (("s3:ListBucketVersions",), _S3.format("ListObjectVersions")),
    # 08 deletes every version and delete marker by VersionId (storage.teardown.empty_bucket)
    "s3:DeleteObjects": (("s3:DeleteObject", "s3:DeleteObjectVersion"), _S3.format("DeleteObjects")),
    "s3:PutBucketEncryption": (("s3:PutEncryptionConfiguration",), _S3.format("PutBucketEncryption")),
    "s3:PutBucketLifecycleConfiguration": (
        ("s3:PutLifecycleConfiguration",),
        _S3.format("PutBucketLifecycleConfiguration"),
    ),
    "s3:PutPublicAccessBlock": (("s3:PutBucketPublicAccessBlock",), _S3.format("PutPublicAccessBlock")),
    "s3:GetPublicAccessBlock": (("s3:GetBucketPublicAccessBlock",), _S3.format("GetPublicAccessBlock")),
    "s3:GetBucketEncryption": (("s3:GetEncryptionConfiguration",), _S3.format("GetBucketEncryption")),
    "s3:GetBucketLifecycleConfiguration": (
        ("s3:GetLifecycleConfiguration",),
        _S3.format("GetBucketLifecycleConfiguration"),
    ),
    "s3:ListBuckets": (("s3:ListAllMyBuckets",), _S3.format("ListBuckets")),
    # the role is created with the tutorial's tag: tagging on create needs iam:TagRole too
    "iam:CreateRole": (("iam:CreateRole", "iam:TagRole"), _SAR.format("awsidentityandaccessmanagementiam")),
    # the association hands the storage role to EKS Pod Identity
    "eks:CreatePodIdentityAssociation": (
        ("eks:CreatePodIdentityAssociation", "iam:PassRole", "iam:GetRole"),
        _SAR.format("amazonelastickubernetesservice"),
    ),
    "eks:UpdatePodIdentityAssociation": (
        ("eks:UpdatePodIdentityAssociation", "iam:PassRole", "iam:GetRole"),
        _SAR.format("amazonelastickubernetesservice"),
    ),
    # "No permissions are required to perform this operation."
    "sts:GetCallerIdentity": ((), "https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html"),
}

#: What eksctl itself needs (attached beside the learner policy): its documentation's four policies.
EKSCTL_POLICIES = (
    "AmazonEC2FullAccess (AWS managed)",
    "AWSCloudFormationFullAccess (AWS managed)",
    "EksAllAccess (eks:*, ssm:GetParameter(s) on /aws/*, kms:CreateGrant, kms:DescribeKey, logs:PutRetentionPolicy)",
    "IamLimitedAccess (instance profiles, eksctl-* roles, OIDC providers, iam:PassRole, iam:TagRole...)",
)
EKSCTL_SOURCE = (
    "https://eksctl.io/usage/minimum-iam-policies/ (eksctl-io/eksctl userdocs/src/usage/minimum-iam-policies.md "
    "@ 09f5281720a635bea847c3ad89f694b5b664cd2b)"
)
_EKSCTL_IAM = (
    "CreateInstanceProfile DeleteInstanceProfile GetInstanceProfile RemoveRoleFromInstanceProfile GetRole CreateRole "
    "DeleteRole AttachRolePolicy PutRolePolicy ListInstanceProfiles AddRoleToInstanceProfile "
    "ListInstanceProfilesForRole PassRole DetachRolePolicy DeleteRolePolicy GetRolePolicy GetOpenIDConnectProvider "
    "CreateOpenIDConnectProvider DeleteOpenIDConnectProvider TagOpenIDConnectProvider ListAttachedRolePolicies TagRole"
)


def eksctl_policy(account: str) -> dict[str, Any]:
    """eksctl's four documented policies as one document (the statements without conditions; the service-linked
    role statements are left out): what the fake eksctl's own AWS calls are checked against."""
    iam_arns = [
        f"arn:aws:iam::{account}:instance-profile/eksctl-*",
        f"arn:aws:iam::{account}:role/eksctl-*",
        f"arn:aws:iam::{account}:oidc-provider/*",
        f"arn:aws:iam::{account}:role/aws-service-role/eks-nodegroup.amazonaws.com/AWSServiceRoleForAmazonEKSNodegroup",
        f"arn:aws:iam::{account}:role/eksctl-managed-*",
    ]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": a, "Resource": "*"}
            for a in ("ec2:*", "elasticloadbalancing:*", "cloudwatch:*", "autoscaling:*", "cloudformation:*", "eks:*")
        ]
        + [
            {
                "Effect": "Allow",
                "Action": ["ssm:GetParameter", "ssm:GetParameters"],
                "Resource": [f"arn:aws:ssm:*:{account}:parameter/aws/*", "arn:aws:ssm:*::parameter/aws/*"],
            },
            {"Effect": "Allow", "Action": ["kms:CreateGrant", "kms:DescribeKey"], "Resource": "*"},
            {"Effect": "Allow", "Action": ["logs:PutRetentionPolicy"], "Resource": "*"},
            {"Effect": "Allow", "Action": [f"iam:{a}" for a in _EKSCTL_IAM.split()], "Resource": iam_arns},
            {"Effect": "Allow", "Action": ["iam:GetRole"], "Resource": [f"arn:aws:iam::{account}:role/*"]},
        ],
    }


def actions(call: str) -> tuple[str, ...]:
    """The IAM actions one operation needs (``s3:HeadBucket`` -> ``("s3:ListBucket",)``)."""
    return EXCEPTIONS[call][0] if call in EXCEPTIONS else (call,)


def all_calls() -> set[str]:
    return {c for calls in CALLS.values() for c in calls}


def all_actions() -> list[str]:
    """Every IAM action of :data:`CALLS`, sorted, once each."""
    return sorted({a for c in all_calls() for a in actions(c)})


#: The cluster the committed ``docs/iam/learner-policy.json`` is rendered for (``aws.cluster_name``'s default).
DEFAULT_CLUSTER = "raytrain-tutorial"
#: The tag every role and bucket the tutorial creates carries (``targets.aws.common.TAG_KEY``), its value the
#: cluster's name.
TAG_KEY = "raytrain-tutorial"
_ROLE = "arn:aws:iam::*:role/{role}"
_BUCKET, _OBJECTS = "arn:aws:s3:::{bucket}", "arn:aws:s3:::{bucket}/*"
_STACK = "arn:aws:cloudformation:*:*:stack/eksctl-{cluster}-*"
# How each action that changes or deletes is scoped to what the tutorial creates: (resource, conditions).
#  * roles: the storage role is named ``<cluster>-<namespace>-<service account>-s3`` (plan.iam.role_name) and created
#    with the tag TAG_KEY=<cluster>; a role's tag is ``aws:ResourceTag/<key>`` (IAM User Guide, "Controlling access to
#    and for IAM users and roles using tags", access_iam-tags.html, read 2026-12-06), so the actions on an existing
#    role need both the name and the tag. CreateRole/TagRole happen before the tag exists: the name only.
#  * iam:PassRole only to EKS Pod Identity: ``iam:PassedToService`` = ``pods.eks.amazonaws.com`` (the value AWS's
#    EMR on EKS guide, "Using EKS Pod Identity", gives for the role of a Pod Identity association; the EKS User Guide's
#    pod-id-association.html says only that the caller needs iam:PassRole; read 2026-12-06).
#  * buckets: S3 buckets by name (the derived ``<cluster>-<account>-<region>``, or the bucket the learner set), their
#    objects under ``<bucket>/*``.
#  * stacks: the node group stacks eksctl names ``eksctl-<cluster>-nodegroup-<name>`` (the AZ fallback deletes them).
_TAGGED = {"StringEquals": {f"aws:ResourceTag/{TAG_KEY}": "{cluster}"}}
SCOPES: dict[str, tuple[str, dict[str, Any]]] = {
    **{f"iam:{a}": (_ROLE, {}) for a in ("CreateRole", "TagRole")},
    **{
        f"iam:{a}": (_ROLE, _TAGGED)
        for a in ("UpdateAssumeRolePolicy", "PutRolePolicy", "DeleteRolePolicy", "DetachRolePolicy", "DeleteRole")
    },
    "iam:PassRole": (_ROLE, {"StringEquals": {"iam:PassedToService": "pods.eks.amazonaws.com"}}),
    **{
        f"s3:{a}": (_BUCKET, {})
        for a in (
            "CreateBucket",
            "DeleteBucket",
            "PutBucketPolicy",
            "PutBucketTagging",
            "PutBucketPublicAccessBlock",
            "PutEncryptionConfiguration",
            "PutLifecycleConfiguration",
        )
    },
    **{f"s3:{a}": (_OBJECTS, {}) for a in ("DeleteObject", "DeleteObjectVersion")},
    **{f"cloudformation:{a}": (_STACK, {}) for a in ("DeleteStack", "UpdateTerminationProtection")},
}


def _names(cluster: str, bucket: str) -> dict[str, str]:
    """The patterns of the tutorial's names: roles ``<cluster>-*``, the bucket (derived: ``<cluster>-*``, the
    cluster part cut as plan.iam.derived_bucket_name may cut it)."""
    head = re.sub(r"[^a-z0-9-]", "-", cluster.lower())[:30].strip("-") or "raytrain"
    return {"role": f"{cluster}-*", "bucket": bucket or f"{head}-*", "cluster": cluster}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k.format(**names): _fill(v, names) for k, v in value.items()}
    return value.format(**names)


def learner_policy(cluster: str = DEFAULT_CLUSTER, bucket: str = "") -> dict[str, Any]:
    """The identity policy the tutorial's own calls need (eksctl's: :data:`EKSCTL_POLICIES`) for cluster
    ``cluster`` and its storage ``bucket`` ('' = the derived name): the actions of :data:`SCOPES` on the
    tutorial's resources only, one statement each, the others (reads, creates that name nothing yet) on ``*``."""
    names, wanted = _names(cluster, bucket), all_actions()
    scoped = [a for a in wanted if a in SCOPES]
    statements: list[dict[str, Any]] = [
        {"Sid": "RaytrainTutorialCalls", "Effect": "Allow", "Action": [a for a in wanted if a not in SCOPES],
         "Resource": "*"},
    ]  # fmt: skip
    for action in scoped:
        resource, condition = SCOPES[action]
        service, op = action.split(":")
        st = {"Sid": f"OnlyTheTutorials{service.capitalize()}{op}", "Effect": "Allow", "Action": action}
        st["Resource"] = _fill(resource, names)
        if condition:
            st["Condition"] = _fill(condition, names)
        statements.append(st)
    return {"Version": "2012-10-17", "Statement": statements}


_EXAMPLES = {
    _ROLE: "arn:aws:iam::{account}:role/{role}",
    _BUCKET: "arn:aws:s3:::{bucket}",
    _OBJECTS: "arn:aws:s3:::{bucket}/{role}",
    _STACK: "arn:aws:cloudformation:{region}:{account}:stack/eksctl-{cluster}-nodegroup-gpu/{role}",
}


def scoped_resource(action: str, *, cluster: str, role: str, bucket: str, account: str, region: str) -> str:
    """The ARN of the tutorial's own resource that ``action`` (of :data:`SCOPES`) acts on, '*' for the others:
    what the preflight's simulation asks about (``role``: the storage role's name; ``bucket``: the run's)."""
    if action not in SCOPES:
        return "*"
    values = {"cluster": cluster, "role": role, "bucket": bucket, "account": account, "region": region}
    return _EXAMPLES[SCOPES[action][0]].format(**values)


def simulation_context(cluster: str) -> list[dict[str, Any]]:
    """The request context the scoped actions are simulated with (``iam:SimulatePrincipalPolicy``'s
    ``ContextEntries``): the role's tag and the service a role is passed to, as the tutorial's requests carry them."""
    return [
        {"ContextKeyName": f"aws:ResourceTag/{TAG_KEY}", "ContextKeyValues": [cluster], "ContextKeyType": "string"},
        {"ContextKeyName": "iam:PassedToService", "ContextKeyValues": ["pods.eks.amazonaws.com"],
         "ContextKeyType": "string"},
    ]  # fmt: skip


def render(cluster: str = DEFAULT_CLUSTER, bucket: str = "") -> str:
    return json.dumps(learner_policy(cluster, bucket), indent=2) + "\n"


__all__ = [
    "CALLS",
    "DEFAULT_CLUSTER",
    "EKSCTL_POLICIES",
    "EKSCTL_SOURCE",
    "EXCEPTIONS",
    "actions",
    "all_actions",
    "eksctl_policy",
    "all_calls",
    "as_list",
    "learner_policy",
    "render",
    "SCOPES",
    "TAG_KEY",
    "scoped_resource",
    "simulation_context",
]

if __name__ == "__main__":  # python -m raytrain_helpers.plan.learner_policy [CLUSTER [BUCKET]]
    print(render(*sys.argv[1:3]), end="")
