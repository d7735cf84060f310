"""Step 02 on aws when EC2 has no GPU capacity: the failed node group stack is read, deleted when the tutorial made
it, and the next of 01's ranked AZs is tried (raytrain_helpers.targets.aws.eks.nodegroup_stack and create).

Against the moto server and the fake eksctl, which behave as eksctl's source and CloudFormation do
(tests/fakes/aws/eksctl, tests/fakes/aws/moto_cfn.py): a node group stack EC2 has no capacity for rolls back to
ROLLBACK_COMPLETE with EKS's InsufficientInstanceCapacity reason in its events and eksctl exits 1; afterwards
``eksctl create nodegroup`` counts that stack as an existing node group, skips it and exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml

from raytrain_helpers.plan.eksctl import GPU_CFG
from raytrain_helpers.targets import aws as aws_target
from raytrain_helpers.targets.aws import common
from raytrain_helpers.targets.aws.eks import nodegroup_stack
from tests.fakes.aws import moto_ext
from tests.fakes.aws.fixtures import make_settings
from tests.fakes.k8s_standin import StandIn

pytestmark = pytest.mark.timeout(180)

R, NAME, GPU = "us-west-2", "raytrain-tutorial", "g6.12xlarge"
STACK = f"eksctl-{NAME}-nodegroup-gpu-efa"
EKSCTL = Path(__file__).resolve().parents[4] / "fakes" / "aws" / "eksctl"


@pytest.fixture(autouse=True)
def k8s_api(monkeypatch):
    """The cluster's Kubernetes API, where 02 runs its storage check before the GPU node group."""
    st = StandIn("healthy", delay_s=0.05).start()
    monkeypatch.setenv("FAKE_EKSCTL_API_KUBECONFIG", st.kubeconfig)
    monkeypatch.setattr(nodegroup_stack, "POLL_S", 0.2)
    yield st
    st.stop()


def placed(tmp_path, **params):
    """Settings plus step 01's placement: us-west-2a first, then 2b, 2c."""
    s = make_settings(tmp_path, **params)
    ranked = ["us-west-2a", "us-west-2b", "us-west-2c"]
    common.save_placement(
        s,
        dict(region=R, az=ranked[0], az_id="", instance_type=GPU, gpu_node_count=2, account="123456789012",
             source="ranked", ranked_azs=ranked),
    )  # fmt: skip
    return s


def ops(srv):
    return [" ".join(c["argv"][:2]) for c in srv.eksctl_calls()]


def cfn():
    return boto3.client("cloudformation", region_name=R)


def stacks(name=STACK):
    return [s for s in cfn().list_stacks()["StackSummaries"] if s["StackName"] == name]


def test_no_capacity_in_the_first_az_falls_back_to_the_next_and_a_rerun_creates_nothing(srv, tmp_path, capsys):
    moto_ext.FAKE.capacity[(R, "us-west-2a", GPU)] = 0  # EC2 has no g6.12xlarge in us-west-2a
    s = placed(tmp_path)
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert res.ok, (res.problems, res.causes)
    assert ops(srv) == ["create cluster", "create nodegroup", "create nodegroup"]
    # the cluster's VPC has a private subnet in every AZ it may fall back to, in 01's order
    assert yaml.safe_load(srv.eksctl_calls()[0]["config"])["availabilityZones"] == [
        "us-west-2a",
        "us-west-2b",
        "us-west-2c",
    ]
    short = "InsufficientInstanceCapacity: no g6.12xlarge capacity in us-west-2a"
    assert res.gpu_az_tries == [
        ("us-west-2a", f"{short}; stack ROLLBACK_COMPLETE deleted"),
        ("us-west-2b", "created: node group ACTIVE"),
    ]
    assert res.nodegroup("gpu-efa")["azs"] == ["us-west-2b"] and res.gpu_az == "us-west-2b"
    statuses = sorted(s["StackStatus"] for s in stacks())
    assert statuses == ["CREATE_COMPLETE", "DELETE_COMPLETE"]  # the failed one deleted, the new one created
    # eksctl >= 0.218.0 creates it termination-protected, as it did the failed one 02 had to unprotect to delete
    assert cfn().describe_stacks(StackName=STACK)["Stacks"][0]["EnableTerminationProtection"] is True
    assert common.load_placement(s)["az"] == "us-west-2b"  # 03-08 and a re-run work with where the nodes are
    res.show()
    out = capsys.readouterr().out
    assert "GPU node group, AZ by AZ" in out and "no g6.12xlarge capacity in us-west-2a" in out
    n = len(srv.eksctl_calls())
    again = aws_target.cluster(s, "up", assume_yes=True)
    assert again.ok, again.problems
    assert ops(srv)[n:] == ["utils write-kubeconfig"] and again.gpu_az_tries == []


def test_every_az_short_is_a_problem_naming_them_and_leaves_no_failed_stack(srv, tmp_path):
    for az in ("us-west-2a", "us-west-2b"):
        moto_ext.FAKE.capacity[(R, az, GPU)] = 1  # one instance free, two needed
    res = aws_target.cluster(placed(tmp_path, gpu_az_attempts=2), "up", assume_yes=True)
    assert not res.ok and [az for az, _ in res.gpu_az_tries] == ["us-west-2a", "us-west-2b"]
    (problem,) = [p for p in res.problems if "capacity" in p]
    assert "no g6.12xlarge capacity for 2 nodes in us-west-2a, us-west-2b" in problem
    assert "2 AZ(s) tried of aws.gpu_az_attempts" in problem and "cluster down --yes" in problem
    assert {s["StackStatus"] for s in stacks()} == {"DELETE_COMPLETE"}


def test_a_reservation_fixes_the_az():
    s = make_settings(Path(os.environ.get("TMPDIR", "/tmp")), capacity_reservation_id="cr-0123456789abcdef0")
    private = {"us-west-2a": ["subnet-a"], "us-west-2b": ["subnet-b"]}
    fixed = nodegroup_stack.fixed_reason(s, "capacity-block")
    assert "Capacity Block cr-0123456789abcdef0, which holds capacity in one AZ only" in fixed
    azs, why = nodegroup_stack.candidate_azs(s, "us-west-2a", private, list(private), fixed=fixed)
    assert azs == ["us-west-2a"] and why == fixed
    assert "ODCR" in nodegroup_stack.fixed_reason(s, "default")


def _foreign_failed_stack(subnet: str) -> None:
    """A node group stack of this cluster and node group name that someone else made (no tutorial tag), rolled back
    by a capacity failure."""
    template = {"Resources": {"ManagedNodeGroup": {"Type": "AWS::EKS::Nodegroup", "Properties": {
        "NodegroupName": "gpu-efa", "InstanceTypes": [GPU], "ScalingConfig": {"DesiredSize": 2},
        "Subnets": [subnet]}}}}  # fmt: skip
    tags = {"alpha.eksctl.io/cluster-name": NAME, "alpha.eksctl.io/nodegroup-name": "gpu-efa"}
    cfn().create_stack(
        StackName=STACK, TemplateBody=json.dumps(template), Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
    )
    for _ in range(5):  # the rollback takes a few reads
        if cfn().describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"] != "ROLLBACK_IN_PROGRESS":
            break


def test_eksctl_skips_a_rolled_back_stack_and_a_stack_not_the_tutorials_is_left_alone(srv, tmp_path):
    moto_ext.FAKE.capacity[(R, "us-west-2a", GPU)] = 0
    s = placed(tmp_path, gpu_az_attempts=1)
    first = aws_target.cluster(s, "up", assume_yes=True)
    assert not first.ok and "aws.gpu_az_attempts is 1" in " ".join(first.problems)
    assert {st["StackStatus"] for st in stacks()} == {"DELETE_COMPLETE"}  # the tutorial's own failed stack: deleted
    subnet = yaml.safe_load(Path(first.config_files[GPU_CFG]).read_text())["managedNodeGroups"][0]
    _foreign_failed_stack(subnet["subnets"][0])
    assert cfn().describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"] == "ROLLBACK_COMPLETE"
    # eksctl itself (the fake, as eksctl's source does) takes the rolled-back stack for an existing node group
    run = subprocess.run(
        [sys.executable, str(EKSCTL), "create", "nodegroup", "-f", first.config_files[GPU_CFG]],
        capture_output=True, text=True, env={**os.environ, **srv.env}, check=False,
    )  # fmt: skip
    assert run.returncode == 0 and "1 existing nodegroup(s) (gpu-efa) will be excluded" in run.stdout
    assert "gpu-efa" not in boto3.client("eks", region_name=R).list_nodegroups(clusterName=NAME)["nodegroups"]
    n = len(srv.eksctl_calls())
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert not res.ok and "create nodegroup" not in ops(srv)[n:]  # nothing created, nothing deleted
    (problem,) = [p for p in res.problems if STACK in p]
    assert "ROLLBACK_COMPLETE and it has no raytrain-tutorial tag" in problem and "delete-stack" in problem
    assert f"update-termination-protection --no-enable-termination-protection --stack-name {STACK}" in problem
    assert cfn().describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"] == "ROLLBACK_COMPLETE"  # left alone
