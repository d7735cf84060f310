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

``python -m raytrain_helpers.plan.learner_policy`` prints the policy (``docs/iam/learner-policy.json``).
"""

from __future__ import annotations

import json
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


def learner_policy() -> dict[str, Any]:
    """The identity policy the tutorial's own calls need (eksctl's: :data:`EKSCTL_POLICIES`)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "RaytrainTutorialCalls", "Effect": "Allow", "Action": all_actions(), "Resource": "*"},
        ],
    }


def render() -> str:
    return json.dumps(learner_policy(), indent=2) + "\n"


__all__ = [
    "CALLS",
    "EKSCTL_POLICIES",
    "EKSCTL_SOURCE",
    "EXCEPTIONS",
    "actions",
    "all_actions",
    "eksctl_policy",
    "all_calls",
    "learner_policy",
    "render",
]

if __name__ == "__main__":
    print(render(), end="")
