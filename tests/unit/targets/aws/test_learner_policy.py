"""The learner's IAM policy (plan.learner_policy) against what the code really calls: the aws path from 01 to 08
against the fakes (moto server with moto_ext, the fake eksctl, the Kubernetes stand-in), a botocore ``before-call``
hook on every client ``clients.aws.client`` makes; any operation the policy does not list fails the test."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO))

from raytrain_helpers.clients import aws as aws_client  # noqa: E402
from raytrain_helpers.plan import learner_policy  # noqa: E402
from raytrain_helpers.targets import aws  # noqa: E402

preflight = importlib.import_module("raytrain_helpers.targets.aws.preflight")
from raytrain_helpers.targets.aws.jobs import verify  # noqa: E402
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402
from tests.fakes.k8s_standin import standin  # noqa: E402
from tests.unit.targets.aws.test_glue import CONTEXT, FAST, READY_OP, R, _cluster_up  # noqa: E402

placement = importlib.import_module("raytrain_helpers.targets.aws.placement.capacity")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def recorded(monkeypatch) -> set[str]:
    """Every AWS operation any client of ``clients.aws.client`` sends, as ``<signing name>:<operation>``."""
    calls: set[str] = set()
    made = aws_client.client
    hooked: set[int] = set()

    def client(sess, service, region=None):
        c = made(sess, service, region)
        if id(c) not in hooked:
            hooked.add(id(c))
            c.meta.events.register(
                "before-call", lambda model, **k: calls.add(f"{model.service_model.signing_name}:{model.name}")
            )
        return c

    monkeypatch.setattr(aws_client, "client", client)
    return calls


def test_the_aws_path_calls_nothing_the_learner_policy_lacks(srv, tmp_path, monkeypatch, recorded):
    (tmp_path / "01").mkdir()
    placement.capacity(make_settings(tmp_path / "01"), regions=[R], save=False)
    s = _cluster_up(tmp_path)  # 02 (its preflight, the cluster, the storage, the check pod, the GPU node group)
    with standin("healthy", context=CONTEXT, **READY_OP) as st:
        monkeypatch.setenv("KUBECONFIG", st.kubeconfig)
        assert kuberay.raycluster(s, **FAST).ok  # 04
        bucket = f"s3://raytrain-tutorial-123456789012-{R}/raytrain"
        job = {"result": {"storage_path": bucket, "checkpoint": f"{bucket}/{s.run_name}/checkpoint_000001"}}
        assert verify.checkpoint_row(s, job)[2].endswith("(nothing there)")  # 06's checkpoint listing
        assert aws.teardown(s, assume_yes=True).ok  # 08
    assert any(r.what == "IAM permissions" for r in preflight.preflight(s).rows)
    print(json.dumps(sorted(recorded)))
    missing = recorded - learner_policy.all_calls()
    assert not missing, f"the code calls {sorted(missing)}, which plan/learner_policy.py CALLS lacks"
    policy = [a for st in learner_policy.learner_policy()["Statement"] for a in learner_policy.as_list(st["Action"])]
    for action in (
        "iam:PassRole",
        "iam:TagRole",
        "eks:ListPodIdentityAssociations",
        "s3:ListBucketVersions",
        "s3:DeleteObjectVersion",
    ):
        assert action in policy
    # nothing listed that the code does not call (besides the calls of paths this run does not take)
    not_taken = {
        "ec2:CreateCapacityReservation",  # 01's probe (probe=True)
        "ec2:CancelCapacityReservation",
        "ec2:DescribeCapacityBlockOfferings",  # Capacity Blocks (p-class types)
        "servicequotas:GetAWSDefaultServiceQuota",  # a quota never applied in the account
        "eks:UpdatePodIdentityAssociation",  # an association pointing at another role
        "iam:UpdateAssumeRolePolicy",  # a role whose trust policy drifted
        "iam:ListRoleTags",
        "iam:DetachRolePolicy",  # a role with attached policies
        "cloudformation:DescribeStackEvents",  # a failed node group stack
        "cloudformation:UpdateTerminationProtection",  # ... that the tutorial made, protection off
        "cloudformation:DeleteStack",  # ... then deleted (tests/unit/targets/aws/eks/test_gpu_az_fallback.py)
        "autoscaling:DescribeScalingActivities",
        "ec2:DescribeNatGateways",
        "iam:SimulatePrincipalPolicy",  # moto 5.2.1 does not implement it: tested with Stubber in test_preflight
    }
    assert learner_policy.all_calls() - recorded - not_taken == set()


def test_the_committed_policy_is_the_rendered_one():
    assert (REPO / "docs" / "iam" / "learner-policy.json").read_text() == learner_policy.render()


def test_the_fake_eksctls_own_calls_are_what_eksctls_documented_policies_allow():
    """eksctl's calls are eksctl's: the fake calls no AWS operation that eksctl's minimum IAM policies do not allow
    (each ``<client>.<method>(`` of tests/fakes/aws/eksctl, mapped to its operation by botocore's model)."""
    import re

    import boto3

    from raytrain_helpers.plan import iam_eval

    source = (REPO / "tests" / "fakes" / "aws" / "eksctl").read_text()
    doc = learner_policy.eksctl_policy("123456789012")
    sess = boto3.session.Session(region_name=R, aws_access_key_id="x", aws_secret_access_key="y")
    seen = []
    for var, service in (("ec2", "ec2"), ("eks", "eks"), ("iam", "iam"), ("cfn", "cloudformation")):
        c = sess.client(service)
        paged = set(re.findall(rf"\b{var}\.get_paginator\(\"([a-z_]+)\"\)", source))  # the operation it pages
        for method in sorted(set(re.findall(rf"\b{var}\.([a-z_]+)\(", source)) - {"get_paginator"} | paged):
            op = f"{c.meta.service_model.signing_name}:{c.meta.method_to_api_mapping[method]}"
            resource = "arn:aws:iam::123456789012:role/eksctl-raytrain-tutorial-cluster-ServiceRole"
            seen.append(op)
            assert iam_eval.decide(doc, op, resource if op.startswith("iam:") else "*") == "Allow", op
    assert {"cloudformation:CreateStack", "eks:CreateCluster", "iam:CreateRole", "ec2:CreateVpc"} <= set(seen)


ACCOUNT = "123456789012"
THE_TUTORIALS = {
    "role": f"arn:aws:iam::{ACCOUNT}:role/raytrain-tutorial-ray-train-raytrain-s3",
    "bucket": f"arn:aws:s3:::raytrain-tutorial-{ACCOUNT}-us-west-2",
    "objects": f"arn:aws:s3:::raytrain-tutorial-{ACCOUNT}-us-west-2/raytrain/ckpt",
    "stack": f"arn:aws:cloudformation:us-west-2:{ACCOUNT}:stack/eksctl-raytrain-tutorial-nodegroup-gpu/0a1b",
}
SOMEONE_ELSES = {
    "role": f"arn:aws:iam::{ACCOUNT}:role/ProductionDeployer",
    "bucket": "arn:aws:s3:::company-data-lake",
    "objects": "arn:aws:s3:::company-data-lake/raytrain/ckpt",
    "stack": f"arn:aws:cloudformation:us-west-2:{ACCOUNT}:stack/eksctl-prod-nodegroup-gpu/0a1b",
}
CHANGES = {  # the actions that change or delete, and the kind of resource each acts on
    "iam:UpdateAssumeRolePolicy": "role",
    "iam:PutRolePolicy": "role",
    "iam:DeleteRole": "role",
    "iam:PassRole": "role",
    "s3:DeleteBucket": "bucket",
    "s3:PutBucketPolicy": "bucket",
    "cloudformation:DeleteStack": "stack",
    "iam:DeleteRolePolicy": "role",
    "iam:DetachRolePolicy": "role",
    "s3:DeleteObjectVersion": "objects",
}


def _context(cluster: str = "raytrain-tutorial") -> dict[str, str]:
    """What the tutorial's own requests carry: its tag on the role, the role passed to EKS Pod Identity."""
    return {"aws:ResourceTag/raytrain-tutorial": cluster, "iam:PassedToService": "pods.eks.amazonaws.com"}


@pytest.mark.parametrize("action", sorted(CHANGES))
def test_each_change_is_allowed_on_the_tutorials_resources_only(action):
    from raytrain_helpers.plan import iam_eval

    doc = learner_policy.learner_policy()
    statements = [st for st in doc["Statement"] if action in learner_policy.as_list(st["Action"])]
    assert statements and all(st["Resource"] != "*" for st in statements), statements
    kind = CHANGES[action]
    assert iam_eval.decide(doc, action, THE_TUTORIALS[kind], _context()) == iam_eval.ALLOW
    assert iam_eval.decide(doc, action, SOMEONE_ELSES[kind], _context()) == iam_eval.IMPLICIT_DENY
    if kind == "role" and action != "iam:PassRole":  # a role of the tutorial's name without the tutorial's tag
        untagged = {**_context(), "aws:ResourceTag/raytrain-tutorial": "another-cluster"}
        assert iam_eval.decide(doc, action, THE_TUTORIALS[kind], untagged) == iam_eval.IMPLICIT_DENY
    if action == "iam:PassRole":  # the tutorial's role passed to any other service
        to_ec2 = {**_context(), "iam:PassedToService": "ec2.amazonaws.com"}
        assert iam_eval.decide(doc, action, THE_TUTORIALS[kind], to_ec2) == iam_eval.IMPLICIT_DENY


def test_the_policy_for_another_cluster_and_bucket_names_them():
    from raytrain_helpers.plan import iam_eval

    doc = learner_policy.learner_policy("team-a", "team-a-checkpoints")
    assert iam_eval.decide(doc, "s3:DeleteBucket", "arn:aws:s3:::team-a-checkpoints") == iam_eval.ALLOW
    assert iam_eval.decide(doc, "s3:DeleteBucket", THE_TUTORIALS["bucket"]) == iam_eval.IMPLICIT_DENY
    role = f"arn:aws:iam::{ACCOUNT}:role/team-a-ray-train-raytrain-s3"
    assert iam_eval.decide(doc, "iam:DeleteRole", role, _context("team-a")) == iam_eval.ALLOW
    assert iam_eval.decide(doc, "iam:DeleteRole", role, _context()) == iam_eval.IMPLICIT_DENY
