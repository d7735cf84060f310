"""Termination-protected node group stacks (eksctl >= 0.218.0 creates every stack protected): CloudFormation refuses
DeleteStack while the protection is on (moto does not, tests/fakes/aws/moto_cfn.py adds it), and 02 turns it off -
only on a stack whose tags prove it is the tutorial's - before deleting a failed node group stack."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ClientError

from raytrain_helpers.targets.aws.eks import nodegroup_stack
from tests.fakes.aws.fixtures import make_settings, mocked_aws  # noqa: F401 - fixture

R, NAME = "us-west-2", "raytrain-tutorial"
STACK = f"eksctl-{NAME}-nodegroup-gpu-efa"
TEMPLATE = json.dumps(
    {"Resources": {"M": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": "x", "Name": "/m"}}}}
)


def protected_stack(cfn, tags: dict[str, str]) -> str:
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    return cfn.create_stack(StackName=STACK, TemplateBody=TEMPLATE, EnableTerminationProtection=True, Tags=tag_list)[
        "StackId"
    ]


def ours() -> dict[str, str]:
    return {
        nodegroup_stack.CLUSTER_TAG: NAME,
        nodegroup_stack.NODEGROUP_TAG: "gpu-efa",
        nodegroup_stack.TUTORIAL_TAG: NAME,  # the value names the cluster (targets/aws/ownership.py)
    }


def test_cloudformation_refuses_to_delete_a_protected_stack_until_the_protection_is_off(mocked_aws):  # noqa: F811
    cfn = boto3.client("cloudformation", region_name=R)
    sid = protected_stack(cfn, ours())
    with pytest.raises(ClientError) as e:
        cfn.delete_stack(StackName=STACK)
    assert e.value.response["Error"]["Code"] == "ValidationError"
    assert f"Stack [{STACK}] cannot be deleted while TerminationProtection is enabled" in str(e.value)
    st = cfn.describe_stacks(StackName=STACK)["Stacks"][0]
    assert (st["StackStatus"], st["EnableTerminationProtection"]) == ("CREATE_COMPLETE", True)  # unchanged
    assert cfn.update_termination_protection(StackName=sid, EnableTerminationProtection=False)["StackId"] == sid
    cfn.delete_stack(StackName=sid)
    assert cfn.describe_stacks(StackName=sid)["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE"
    with pytest.raises(ClientError, match="does not exist"):  # no protection to set on a deleted stack
        cfn.update_termination_protection(StackName=sid, EnableTerminationProtection=True)


def test_the_tutorials_protected_stack_is_unprotected_then_deleted(mocked_aws, tmp_path):  # noqa: F811
    cfn = boto3.client("cloudformation", region_name=R)
    protected_stack(cfn, ours())
    found = nodegroup_stack.read(cfn, NAME, "gpu-efa")
    assert found is not None and found.protected
    assert nodegroup_stack.delete(cfn, found, make_settings(tmp_path)) == "DELETE_COMPLETE"


def test_a_protected_stack_not_the_tutorials_keeps_its_protection(mocked_aws, tmp_path):  # noqa: F811
    cfn = boto3.client("cloudformation", region_name=R)
    theirs = {k: v for k, v in ours().items() if k != nodegroup_stack.TUTORIAL_TAG}
    protected_stack(cfn, theirs)
    found = nodegroup_stack.read(cfn, NAME, "gpu-efa")
    with pytest.raises(ValueError, match="no raytrain-tutorial tag"):
        nodegroup_stack.delete(cfn, found, make_settings(tmp_path))
    st = cfn.describe_stacks(StackName=STACK)["Stacks"][0]
    assert (st["StackStatus"], st["EnableTerminationProtection"]) == ("CREATE_COMPLETE", True)


def test_the_suggested_commands_turn_the_protection_off_before_deleting():
    stack = nodegroup_stack.NodegroupStack(STACK, "id", "ROLLBACK_COMPLETE", protected=True)
    text = nodegroup_stack.delete_commands(stack, R)
    off = f"aws cloudformation update-termination-protection --no-enable-termination-protection --stack-name {STACK}"
    assert off in text and text.index(off) < text.index(f"aws cloudformation delete-stack --stack-name {STACK}")
