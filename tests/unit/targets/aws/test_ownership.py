"""The ownership rule of the aws path: a look-alike of every kind the tutorial creates (same names, not the tutorial's
tag or label) is planted in the fakes - moto (EKS cluster, node group, eksctl's node group stack, the vpc-cni add-on,
the storage role with its policy, the bucket with its policy, the Pod Identity association), the Kubernetes stand-in
(namespace, ServiceAccount, NetworkPolicies, RayCluster) and the fake helm (the KubeRay operator's and the device
plugins' releases) - then 02, 03, 04 and 08 run with ``assume_yes``; every look-alike is unchanged afterwards, and
the run says, for each, what it left and why."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import boto3
import pytest

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO))

from raytrain_helpers.clients import aws as aws_client  # noqa: E402
from raytrain_helpers.plan import learner_policy  # noqa: E402
from raytrain_helpers.plan.raycluster import NETWORK_POLICIES  # noqa: E402
from raytrain_helpers.targets import aws  # noqa: E402
from raytrain_helpers.targets.aws import cluster_check as existing  # noqa: E402
from raytrain_helpers.targets.aws import common  # noqa: E402
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay  # noqa: E402
from raytrain_helpers.targets.aws.plugins import install as plugins  # noqa: E402
from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402
from tests.fakes.k8s_standin import standin  # noqa: E402

pytestmark = pytest.mark.timeout(300)

QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=3, poll_s=0.05, log=QUIET)
NAME, R, ACCOUNT = "raytrain-tutorial", "us-west-2", "123456789012"
CONTEXT = f"{NAME}.{R}.eksctl.io"
ROLE = f"{NAME}-ray-train-raytrain-s3"
BUCKET = f"{NAME}-{ACCOUNT}-{R}"
STACK = f"eksctl-{NAME}-nodegroup-gpu-efa"
THEIRS = {"team": "data-platform"}
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                 "Action": "sts:AssumeRole"}]}  # fmt: skip


def _c(service):
    return boto3.client(service, region_name=R)


def _plant_aws() -> None:
    """Someone's cluster made by eksctl from another config (eksctl's own tags, not the tutorial's), its GPU node
    group and stack, the storage role, bucket and association of the tutorial's names."""
    iam, eks, ec2 = _c("iam"), _c("eks"), _c("ec2")
    role = iam.create_role(RoleName="their-cluster-role", AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{R}{z}")["Subnet"]["SubnetId"]
        for i, z in enumerate("ab")
    ]
    eks.create_cluster(
        name=NAME, roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
        tags={"alpha.eksctl.io/cluster-name": NAME, **THEIRS},
    )  # fmt: skip
    eks.create_nodegroup(
        clusterName=NAME, nodegroupName="gpu-efa", nodeRole=role, subnets=subnets[:1], instanceTypes=["g6.12xlarge"],
        scalingConfig={"minSize": 1, "maxSize": 1, "desiredSize": 1},
        tags={"alpha.eksctl.io/nodegroup-name": "gpu-efa", **THEIRS},
    )  # fmt: skip
    eks.create_addon(clusterName=NAME, addonName="vpc-cni")  # no configurationValues: policies not enforced
    eks.create_addon(clusterName=NAME, addonName="eks-pod-identity-agent")
    template = {"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"M": {"Type": "AWS::SSM::Parameter",
                "Properties": {"Type": "String", "Value": "x", "Name": f"/theirs/{STACK}"}}}}  # fmt: skip
    _c("cloudformation").create_stack(
        StackName=STACK, TemplateBody=json.dumps(template),
        Tags=[{"Key": "alpha.eksctl.io/cluster-name", "Value": NAME},
              {"Key": "alpha.eksctl.io/nodegroup-name", "Value": "gpu-efa"}],
    )  # fmt: skip
    theirs = iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(TRUST), Tags=[
        {"Key": k, "Value": v} for k, v in THEIRS.items()])["Role"]["Arn"]  # fmt: skip
    iam.put_role_policy(
        RoleName=ROLE,
        PolicyName="theirs",
        PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*"}]}
        ),
    )
    s3 = _c("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": R})
    s3.put_bucket_tagging(Bucket=BUCKET, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in THEIRS.items()]})
    s3.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "Theirs", "Effect": "Deny", "Principal": "*", "Action": "s3:DeleteBucket",
         "Resource": f"arn:aws:s3:::{BUCKET}"}]}))  # fmt: skip
    s3.put_object(Bucket=BUCKET, Key="their/data.bin", Body=b"theirs")
    eks.create_pod_identity_association(
        clusterName=NAME, namespace="ray-train", serviceAccount="raytrain", roleArn=theirs, tags=THEIRS
    )


def _k8s_lookalikes() -> list[dict]:
    labels = {"app": "theirs"}
    meta = lambda name: {"name": name, "namespace": "ray-train", "labels": labels}  # noqa: E731
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ray-train", "labels": labels}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("raytrain")},
        *[
            {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta(p),
             "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
            for p in NETWORK_POLICIES
        ],
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("raytrain"),
         "spec": {"rayVersion": "2.9.0", "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
             "containers": [{"name": "ray-head", "image": "theirs/ray:2.9.0"}]}}}}},
    ]  # fmt: skip


def _aws_snapshot() -> dict:
    eks, iam, s3 = _c("eks"), _c("iam"), _c("s3")
    c = eks.describe_cluster(name=NAME)["cluster"]
    ng = eks.describe_nodegroup(clusterName=NAME, nodegroupName="gpu-efa")["nodegroup"]
    (assoc,) = eks.list_pod_identity_associations(clusterName=NAME)["associations"]
    assoc = eks.describe_pod_identity_association(clusterName=NAME, associationId=assoc["associationId"])
    stack = _c("cloudformation").describe_stacks(StackName=STACK)["Stacks"][0]
    return {
        "cluster": (c["status"], c["tags"]),
        "nodegroups": eks.list_nodegroups(clusterName=NAME)["nodegroups"],
        "nodegroup": (ng["status"], ng["tags"], ng["scalingConfig"]),
        "addons": sorted(eks.list_addons(clusterName=NAME)["addons"]),
        "stack": (stack["StackStatus"], sorted((t["Key"], t["Value"]) for t in stack["Tags"])),
        "role": (iam.get_role(RoleName=ROLE)["Role"]["AssumeRolePolicyDocument"],
                 iam.list_role_policies(RoleName=ROLE)["PolicyNames"],
                 iam.get_role_policy(RoleName=ROLE, PolicyName="theirs")["PolicyDocument"]),
        "bucket": (s3.get_bucket_policy(Bucket=BUCKET)["Policy"], s3.get_bucket_tagging(Bucket=BUCKET)["TagSet"],
                   [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]),
        "association": (assoc["association"]["roleArn"], assoc["association"]["tags"]),
        "roles": sorted(r["RoleName"] for r in iam.list_roles()["Roles"]),
        "buckets": sorted(b["Name"] for b in s3.list_buckets()["Buckets"]),
    }  # fmt: skip


def _k8s_snapshot(st) -> dict:
    def strip(o):
        md = o["metadata"]
        return (md["name"], md.get("namespace"), md.get("labels"), md.get("annotations"), o.get("spec"))

    return {
        "namespace": strip(st.get("v1", "namespaces", "ray-train", "")),
        "objects": sorted(
            json.dumps(strip(o), sort_keys=True)
            for gv, plural in (("v1", "serviceaccounts"), ("networking.k8s.io/v1", "networkpolicies"),
                               ("ray.io/v1", "rayclusters"))
            for o in st.objects(gv, plural, "ray-train")
        ),  # fmt: skip
        "daemonsets": sorted(json.dumps(strip(o)[:4]) for o in st.objects("apps/v1", "daemonsets", "kube-system")),
        "operator": sorted(json.dumps(strip(o)[:4]) for o in st.objects("apps/v1", "deployments", "kuberay-system")),
        "releases": sorted(json.dumps(strip(o)[:3], sort_keys=True) for ns in ("kube-system", "kuberay-system")
                           for o in st.objects("v1", "configmaps", ns) if o["metadata"]["name"].startswith("sh.helm")),
    }  # fmt: skip


def _placed(tmp_path, **params):
    s = make_settings(tmp_path, **params)
    common.save_placement(
        s, dict(region=R, az=f"{R}a", az_id="", instance_type=s.aws.gpu_node_type, gpu_node_count=2,
                account=ACCOUNT, source="ranked"),
    )  # fmt: skip
    return s


def _record_calls(monkeypatch) -> set[str]:
    """Every AWS operation the product's clients send (``<signing name>:<operation>``), to hold against the learner's
    policy (as tests/unit/targets/aws/test_learner_policy.py does for the path that creates the cluster)."""
    calls: set[str] = set()
    made = aws_client.client

    def client(sess, service, region=None):
        c = made(sess, service, region)
        c.meta.events.register(
            "before-call", lambda model, **k: calls.add(f"{model.service_model.signing_name}:{model.name}")
        )
        return c

    monkeypatch.setattr(aws_client, "client", client)
    return calls


def test_every_lookalike_is_left_unchanged_from_02_to_08_and_the_run_says_why(srv, tmp_path, monkeypatch, capsys):
    _plant_aws()
    calls = _record_calls(monkeypatch)
    before = _aws_snapshot()
    s = _placed(tmp_path)
    # 02 without aws.existing_cluster: refused before anything is created
    res = aws.cluster(s, "up", assume_yes=True)
    assert not res.ok and srv.eksctl_calls() == []
    (refusal,) = res.problems
    assert f"EKS cluster {NAME} in {R} exists and was not created by the tutorial (eksctl made it" in refusal
    assert f"no tag raytrain-tutorial={NAME}. Nothing was created, changed or deleted" in refusal
    assert "set aws.existing_cluster: true" in refusal and "`-p existing_cluster true`" in refusal
    assert _aws_snapshot() == before
    # 02 with it: no cluster, no node group; the storage's look-alikes stop it, unchanged, each named
    mine = _placed(tmp_path, existing_cluster=True)
    res = aws.cluster(mine, "up", assume_yes=True)
    assert not res.ok and srv.eksctl_calls() == []
    words = " ".join(res.problems)
    assert f"IAM role {ROLE} exists but was not created by the tutorial" in words
    assert "the Pod Identity association of ServiceAccount ray-train/raytrain" in words
    assert "it is not re-pointed at the tutorial's role" in words
    assert any("NetworkPolicy enforcement: NOT enforced: the vpc-cni add-on" in n for n in res.notes), res.notes
    assert _aws_snapshot() == before
    with standin("healthy", context=CONTEXT, set_env=True, plugins_installed=True, operator_installed=True,
                 release_labels={}, preload=_k8s_lookalikes(), delay_s=0.05) as st:  # fmt: skip
        k8s_before = _k8s_snapshot(st)
        # 03 in an existing cluster: read, nothing installed; without the setting: the releases are not upgraded
        r3 = plugins.devices(mine, **FAST)
        assert "aws.existing_cluster: true - the device plugins are read, not installed" in r3.message
        logged = []
        plugins.devices(s, timeout_s=1, poll_s=0.05, log=logged.append)
        assert sum("left as it is - not created by the tutorial" in x for x in logged) == 2, logged
        # 04: the RayCluster, ServiceAccount and NetworkPolicies of the tutorial's names are not applied over
        r4 = kuberay.raycluster(mine, assume_yes=True, **FAST)
        assert not r4.ok and "nothing was applied" in r4.message
        assert len([p for p in r4.problems if "left as it is - not created by the tutorial" in p]) == 4, r4.problems
        assert _k8s_snapshot(st) == k8s_before
        # 08 with assume_yes, without the setting: every look-alike is kept, and said
        capsys.readouterr()
        r8 = aws.teardown(s, assume_yes=True)
        r8.show()
        out = capsys.readouterr().out
        assert _k8s_snapshot(st) == k8s_before
    assert _aws_snapshot() == before
    assert [c["argv"][:2] for c in srv.eksctl_calls()] == []  # eksctl deleted nothing
    for said in (
        "RayCluster ray-train/raytrain: kept: not the tutorial's (no label app.kubernetes.io/part-of=raytrain-"
        "tutorial)",
        "Namespace ray-train: kept: not the tutorial's",
        "KubeRay operator kuberay-system/kuberay-operator (Helm release kuberay-operator): left as it is - not created "
        "by the tutorial (no release label raytrain-tutorial=raytrain-tutorial)",
        "Helm release nvidia-device-plugin in kube-system: left as it is - not created by the tutorial (no release "
        "label raytrain-tutorial=raytrain-tutorial)",
        "Helm release raytrain-aws-efa-k8s-device-plugin in kube-system: left as it is",
        f"kept: IAM role {ROLE}: left as it is - not created by the tutorial (no tag raytrain-tutorial={NAME})",
        "kept: Pod Identity association of ray-train/raytrain: left as it is - not created by the tutorial",
        f"kept: S3 bucket {BUCKET} and its checkpoints: not created by the tutorial",
        f"kept: EKS cluster {NAME}, its node groups and eksctl stacks: EKS cluster {NAME}: left as it is - not "
        f"created by the tutorial (no tag raytrain-tutorial={NAME}); the tutorial never deletes or changes it",
        "left in the account: nothing",
    ):
        assert said in out, (said, out)
    assert r8.ok and len(r8.steps) == 7 and all(ok and "kept" in ev for _, ok, ev in r8.steps), r8.steps
    assert "teardown: everything the tutorial created is gone; what it did not create is kept (above)" in out
    assert "eks:DescribeAddon" in calls and not calls - learner_policy.all_calls(), calls - learner_policy.all_calls()


def test_network_policy_enforcement_is_read_from_the_vpc_cni_addon(srv, tmp_path):
    s = make_settings(tmp_path)
    _plant_aws()
    eks = _c("eks")
    on, words = existing.network_policy(eks, s)
    assert on is False and words.startswith("NOT enforced") and "aws eks update-addon --cluster-name" in words
    addons = moto_ext.FAKE.addons[(R, NAME)]  # what CreateAddon keeps; the fake serves no UpdateAddon
    addons["vpc-cni"]["configurationValues"] = '{"enableNetworkPolicy": "true"}'
    assert existing.network_policy(eks, s) == (
        True, 'enforced: the vpc-cni add-on\'s configuration sets enableNetworkPolicy: "true"')  # fmt: skip
    del addons["vpc-cni"]
    on, words = existing.network_policy(eks, s)
    assert on is None and "has no EKS vpc-cni add-on (a self-managed CNI)" in words


def test_down_keeps_the_tutorials_cluster_while_it_holds_a_node_group_of_someone_else(srv, tmp_path):
    from tests.unit.targets.aws.test_glue import _cluster_up

    s = _cluster_up(tmp_path)  # the tutorial's cluster, tagged through eksctl
    eks = _c("eks")
    assert eks.describe_cluster(name=NAME)["cluster"]["tags"]["raytrain-tutorial"] == NAME
    gpu = eks.describe_nodegroup(clusterName=NAME, nodegroupName="gpu-efa")["nodegroup"]
    assert gpu["tags"]["raytrain-tutorial"] == NAME  # the node group's `tags` reach the EKS node group
    eks.create_nodegroup(
        clusterName=NAME, nodegroupName="theirs", nodeRole=gpu["nodeRole"], subnets=gpu["subnets"],
        scalingConfig={"minSize": 1, "maxSize": 1, "desiredSize": 1}, tags=THEIRS,
    )  # fmt: skip
    res = aws.cluster(s, "down", assume_yes=True)
    assert res.ok, (res.problems, res.remaining)
    assert [c["argv"][:2] for c in srv.eksctl_calls()][-1] == ["delete", "nodegroup"]  # only the tutorial's
    assert sorted(eks.list_nodegroups(clusterName=NAME)["nodegroups"]) == ["system", "theirs"]
    assert eks.describe_cluster(name=NAME)["cluster"]["status"] == "ACTIVE"
    assert res.kept == [
        f"EKS cluster {NAME}: kept - it holds node group(s) theirs the tutorial did not create, which "
        "deleting the cluster would delete. Fix: remove them yourself if they are yours to remove, then run "
        "`cluster down` again"
    ]
