"""Step 02's AWS calls (raytrain_helpers.targets.aws.eks) under a restricted IAM role, against moto enforcing IAM:
the failure diagnosis's optional signals (Auto Scaling activities, CloudFormation events) become rows; the EKS
describe calls and the settings' capacity reservation are essential (one line naming API, IAM action and fix)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import boto3
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.clients import aws as aws_client  # noqa: E402
from tests.fakes.aws import iam_faults  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402

eks_step = importlib.import_module("raytrain_helpers.targets.aws.eks")

pytestmark = pytest.mark.timeout(120)

R = "us-west-2"
CLUSTER, NODEGROUP = "raytrain-tutorial", "gpu-efa"
DIAGNOSIS = ("eks:DescribeNodegroup", "autoscaling:DescribeScalingActivities", "cloudformation:DescribeStackEvents")


@pytest.fixture
def nodegroup(mocked_aws):
    """A cluster and its GPU node group in moto (created as the administrator, before any role is assumed)."""
    ec2 = boto3.client("ec2", region_name=R)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZone=f"{R}a")["Subnet"]["SubnetId"]
    eks = boto3.client("eks", region_name=R)
    role = f"arn:aws:iam::{iam_faults.ACCOUNT}:role/eks"
    eks.create_cluster(name=CLUSTER, roleArn=role, resourcesVpcConfig={"subnetIds": [subnet]})
    ng = eks.create_nodegroup(clusterName=CLUSTER, nodegroupName=NODEGROUP, subnets=[subnet], nodeRole=role)
    iam_faults.clear()
    yield ng["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
    iam_faults.clear()


def _causes(deny: str) -> list[str]:
    with iam_faults.restricted_role([a for a in DIAGNOSIS if a != deny], deny=[deny]):
        return eks_step.failure_causes(aws_client.session(R), R, CLUSTER, NODEGROUP)


def test_scaling_activities_denied_is_a_row_in_the_diagnosis(nodegroup):
    causes = _causes("autoscaling:DescribeScalingActivities")
    assert causes == [
        f"(Auto Scaling {nodegroup}: unavailable: AccessDenied for autoscaling:DescribeScalingActivities; "
        "the diagnosis shows EKS health and CloudFormation events only)"
    ]


def test_stack_events_denied_is_a_row_in_the_diagnosis(nodegroup):
    causes = _causes("cloudformation:DescribeStackEvents")
    assert causes == [
        f"(CloudFormation eksctl-{CLUSTER}-nodegroup-{NODEGROUP}: unavailable: AccessDenied for "
        "cloudformation:DescribeStackEvents; the diagnosis shows EKS health and Auto Scaling activities only)"
    ]


def test_describe_nodegroup_denied_is_one_line(nodegroup):
    with pytest.raises(aws_client.AwsCallError) as info:
        _causes("eks:DescribeNodegroup")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"DescribeNodegroup failed in {R} (AccessDeniedException")
    assert "IAM action eks:DescribeNodegroup. Fix: allow eks:DescribeNodegroup" in msg


def test_the_settings_reservation_unreadable_is_one_line(mocked_aws, tmp_path):
    settings = make_settings(tmp_path, capacity_reservation_id="cr-0123456789abcdef0")
    with iam_faults.restricted_role(["eks:DescribeCluster"], deny=["ec2:DescribeCapacityReservations"]):
        ctx = eks_step.AwsContext(settings)
        with pytest.raises(aws_client.AwsCallError, match=r"^DescribeCapacityReservations failed in us-west-2 \("):
            eks_step.validate_reservation(ctx, f"{R}a")
