"""A cluster the learner already has (``aws.existing_cluster: true``, profiles/aws-existing-cluster.yaml): ``check
--existing-cluster`` reads what the tutorial needs from it into one table; 02 and 03 create nothing cluster-wide; 04
adds the tutorial's namespace and RayCluster beside the learner's operator; 08 removes only what the tutorial put in
(its storage, namespace and RayCluster) and keeps the cluster, its node group, plugins and operator."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import boto3
import pytest

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO))

from raytrain_helpers.targets import aws  # noqa: E402
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay  # noqa: E402
from raytrain_helpers.targets.aws.plugins import install as plugins  # noqa: E402
from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402
from tests.fakes.k8s_standin import standin  # noqa: E402

preflight = importlib.import_module("raytrain_helpers.targets.aws.preflight")
pytestmark = pytest.mark.timeout(300)

QUIET = lambda *a: None  # noqa: E731
FAST = dict(timeout_s=5, poll_s=0.05, log=QUIET)
NAME, R, ACCOUNT = "team-gpu", "us-west-2", "123456789012"
CONTEXT = f"arn:aws:eks:{R}:{ACCOUNT}:cluster/{NAME}"  # as `aws eks update-kubeconfig` names it
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"},
                                                 "Action": "sts:AssumeRole"}]}  # fmt: skip


def _c(service):
    return boto3.client(service, region_name=R)


def _learners_cluster(network_policy: bool = True) -> None:
    iam, eks, ec2 = _c("iam"), _c("eks"), _c("ec2")
    role = iam.create_role(RoleName="team-gpu-role", AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{R}{z}")["Subnet"]["SubnetId"]
        for i, z in enumerate("ab")
    ]
    eks.create_cluster(name=NAME, version="1.35", roleArn=role, resourcesVpcConfig={"subnetIds": subnets})
    eks.create_nodegroup(
        clusterName=NAME,
        nodegroupName="gpus",
        nodeRole=role,
        subnets=subnets[:1],
        instanceTypes=["g6.12xlarge"],
        scalingConfig={"minSize": 2, "maxSize": 2, "desiredSize": 2},
    )
    values = '{"enableNetworkPolicy": "true"}' if network_policy else "{}"  # fmt: skip
    eks.create_addon(clusterName=NAME, addonName="vpc-cni", configurationValues=values)
    eks.create_addon(clusterName=NAME, addonName="eks-pod-identity-agent")


def _settings(tmp_path):
    return make_settings(tmp_path, existing_cluster=True, cluster_name=NAME, k8s_version="1.35")


def _rows(s) -> dict:
    return {r.what: r for r in preflight.preflight(s, quota=False).rows}


def test_check_reads_what_the_tutorial_needs_from_the_cluster(srv, tmp_path, monkeypatch):
    _learners_cluster(network_policy=False)
    s = _settings(tmp_path)
    with standin("healthy", context=CONTEXT, set_env=True, release_labels={}, delay_s=0.05) as st:
        rows = _rows(s)  # a cluster without device plugins and with NetworkPolicies not enforced
        assert rows["EKS cluster"].status == "ok" and "not created by the tutorial" in rows["EKS cluster"].found
        assert rows["cluster Kubernetes version"].status == "ok"
        assert rows["Kubernetes API"].status == "ok"
        assert rows["KubeRay operator"].status == "MISSING" and "04 installs it" in rows["KubeRay operator"].fix
        nv = rows["NVIDIA device plugin"]
        assert nv.status == "MISSING" and nv.fix.startswith("`helm upgrade --install nvidia-device-plugin")
        assert rows["GPU nodes (allocatable)"].status == "SHORT"
        np = rows["NetworkPolicy enforcement"]
        assert np.status == "FAILED" and "aws eks update-addon --cluster-name team-gpu" in np.fix and not np.required
        assert rows["EKS Pod Identity agent"].status == "ok"
        assert rows["storage identity"].status == "ok"
        assert "role absent (02 creates it)" in rows["storage identity"].found
    with standin("healthy", context=CONTEXT, set_env=True, release_labels={}, plugins_installed=True,
                 operator_installed=True, delay_s=0.05) as st:  # fmt: skip
        rows = _rows(s)
        for what in ("KubeRay operator", "NVIDIA device plugin", "EFA device plugin", "GPU nodes (allocatable)"):
            assert rows[what].status == "ok", (what, rows[what])
        assert "4 GPU, 1 EFA, role=gpu-worker" in rows["GPU nodes (allocatable)"].found
    # GPU nodes without the label the RayCluster's workers select: named, with the command that labels them
    with standin("healthy", context=CONTEXT, set_env=True, release_labels={}, plugins_installed=True,
                 gpu_role_label=False, delay_s=0.05) as st:  # fmt: skip
        gpus = _rows(s)["GPU nodes (allocatable)"]
        names = [n["metadata"]["name"] for n in st.objects("v1", "nodes") if "role" not in n["metadata"]["labels"]]
        assert gpus.status == "SHORT" and gpus.found.count("role=-") == 2, gpus
        label = f"`kubectl label node {' '.join(sorted(names))} role=gpu-worker`"
        assert gpus.fix == label + " (the RayCluster's workers select it)", gpus.fix


def test_02_to_08_in_an_existing_cluster_create_and_remove_only_the_tutorials(srv, tmp_path, monkeypatch, capsys):
    _learners_cluster()
    s = _settings(tmp_path)
    with standin("healthy", context=CONTEXT, set_env=True, release_labels={}, plugins_installed=True,
                 operator_installed=True, delay_s=0.05) as st:  # fmt: skip
        res = aws.cluster(s, "up", assume_yes=True)
        assert res.ok, res.problems
        assert srv.eksctl_calls() == [] and _c("eks").list_nodegroups(clusterName=NAME)["nodegroups"] == ["gpus"]
        assert any("NetworkPolicy enforcement: enforced" in n for n in res.notes)
        assert any(a.startswith("created S3 bucket team-gpu-") for a in res.actions), res.actions
        assert _c("eks").list_pod_identity_associations(clusterName=NAME)["associations"]
        bill = aws.billing(s)  # the learner's cluster is not the tutorial's cost: `down` keeps it
        assert [r[0].split(" (")[0] for r in bill.rows] == [f"S3 bucket team-gpu-{ACCOUNT}-{R}"], bill.rows
        assert "the cluster is yours (aws.existing_cluster: true)" in " ".join(bill.notes)
        r3 = plugins.devices(s, **FAST)
        assert r3.ok and "the device plugins are read, not installed" in r3.message
        assert kuberay.raycluster(s, **FAST).ok
        daemonsets = sorted(d["metadata"]["name"] for d in st.objects("apps/v1", "daemonsets", "kube-system"))
        capsys.readouterr()
        r8 = aws.teardown(s, assume_yes=True)
        r8.show()
        out = capsys.readouterr().out
        assert r8.ok, r8.steps
        # the learner's plugins and operator stay; the tutorial's namespace (and its RayCluster) went
        assert sorted(d["metadata"]["name"] for d in st.objects("apps/v1", "daemonsets", "kube-system")) == daemonsets
        assert len(st.objects("apps/v1", "deployments", "kuberay-system")) == 1
        assert st.get("v1", "namespaces", "ray-train", "") is None
    assert _c("eks").describe_cluster(name=NAME)["cluster"]["status"] == "ACTIVE"
    assert _c("eks").list_nodegroups(clusterName=NAME)["nodegroups"] == ["gpus"]
    assert _c("eks").list_pod_identity_associations(clusterName=NAME)["associations"] == []
    assert not [b for b in _c("s3").list_buckets()["Buckets"] if b["Name"].startswith("team-gpu-")]
    assert srv.eksctl_calls() == []
    assert f"kept: EKS cluster {NAME}, its node groups and eksctl stacks: aws.existing_cluster is true" in out
    assert "role team-gpu-ray-train-raytrain-s3 deleted" in out and "association deleted" in out
    assert moto_ext.FAKE.addons[(R, NAME)]  # the add-ons untouched
