"""Step 02's order on aws: cluster + system node group -> storage -> the storage check from a one-off pod -> only
then the GPU node group (raytrain_helpers.targets.aws.eks.up / storage_gate).

AWS is the moto server with the fake eksctl (as in test_eks.py); the cluster's Kubernetes API is the stand-in
(tests/fakes/k8s_standin): the fake eksctl writes a kubeconfig pointing at it (FAKE_EKSCTL_API_KUBECONFIG), as
eksctl writes one for the EKS endpoint. The check pod's ``python3 -c`` runs the real storage_check program
(pyarrow) against the moto server; a denied identity is an IAM user holding the pods' policy, with moto enforcing
IAM only while the pod's program runs (the stand-in's exec_handler, which runs the program for real).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.plan import iam as iam_plan  # noqa: E402
from raytrain_helpers.targets import aws as aws_target  # noqa: E402
from raytrain_helpers.targets.aws.plugins import owners as device_owners  # noqa: E402
from raytrain_helpers.targets.aws.storage import gate as storage_gate
from raytrain_helpers.targets.aws.storage import identity  # noqa: E402
from tests.fakes.k8s_standin import StandIn  # noqa: E402
from tests.fakes.k8s_standin import server as standin_server  # noqa: E402
from tests.unit.targets.aws.eks.test_eks import R, ops, placed  # noqa: E402

pytestmark = pytest.mark.timeout(180)

ACCOUNT = "123456789012"
BUCKET = f"raytrain-tutorial-{ACCOUNT}-{R}"
POD = storage_gate.POD_NAME


def _nodegroups():
    return boto3.client("eks", region_name=R).list_nodegroups(clusterName="raytrain-tutorial")["nodegroups"]


def _k8s(monkeypatch, **opts):
    st = StandIn("healthy", delay_s=0.05, **opts).start()
    monkeypatch.setenv("FAKE_EKSCTL_API_KUBECONFIG", st.kubeconfig)
    return st


def _pods(st):
    """The pods of the tutorial's namespace (make_settings': ray-train)."""
    assert st.get("v1", "namespaces", "ray-train") is not None
    return [p["metadata"]["name"] for p in st.objects("v1", "pods", "ray-train")]


def test_up_checks_the_storage_from_a_pod_before_creating_the_gpu_nodegroup(srv, tmp_path, monkeypatch):
    seen = {}

    def at_exec(pod, argv):  # what exists when the check runs; then the program runs for real
        seen[pod["metadata"]["name"]] = dict(
            nodegroups=_nodegroups(),
            bucket=[b["Name"] for b in boto3.client("s3", region_name=R).list_buckets()["Buckets"]],
            sa=pod["spec"]["serviceAccountName"],
            node=pod["spec"].get("nodeName"),
            image=pod["spec"]["containers"][0]["image"],
        )

    st = _k8s(monkeypatch, exec_handler=at_exec)
    try:
        s = placed(tmp_path)
        res = aws_target.cluster(s, "up", assume_yes=True)
        assert res.ok, (res.problems, res.causes)
        assert seen[POD] == dict(
            nodegroups=["system"],  # the GPU node group did not exist yet
            bucket=[BUCKET],
            sa=s.kubernetes.service_account,
            node="ip-10-0-1-10.us-west-2.compute.internal",  # the system node
            image=s.versions.dlc_image,
        )
        assert ops(srv) == ["create cluster", "create nodegroup"]
        i_check = next(i for i, a in enumerate(res.actions) if a.startswith(f"storage check from pod {POD}"))
        i_gpu = next(i for i, a in enumerate(res.actions) if a.startswith("create GPU node group"))
        i_role = next(i for i, a in enumerate(res.actions) if "IAM role" in a)
        assert i_role < i_check < i_gpu, res.actions
        assert POD not in _pods(st)  # deleted after
        k = s.kubernetes
        assert st.get("v1", "serviceaccounts", k.service_account, k.namespace) is not None
        # a re-run: nothing created, no check pod (no GPU node group to gate)
        n = len(st.cluster.exec_log)
        again = aws_target.cluster(s, "up", assume_yes=True)
        assert again.ok and ops(srv)[2:] == ["utils write-kubeconfig"] and len(st.cluster.exec_log) == n
        # the namespace and ServiceAccount applied again (as 04 does): no error
        assert storage_gate.run(s, poll_s=0.05, log=lambda *a: None)[0]
        assert POD not in _pods(st)
    finally:
        st.stop()


def test_plan_says_the_order_and_creates_nothing(srv, tmp_path):
    res = aws_target.cluster(placed(tmp_path), "plan")
    kinds = [a.split(" ")[:2] for a in res.actions]
    assert kinds == [
        ["create", "EKS"],
        ["create", "S3"],
        ["create", "IAM"],
        ["associate", "raytrain-tutorial-ray-train-raytrain-s3"],
        ["check", "the"],
        ["create", "GPU"],
    ], res.actions
    assert srv.eksctl_calls() == []


def _role_session(s, policy: dict | None = None) -> dict:
    """A session of the storage role (what EKS Pod Identity's agent hands the pod), its policy replaced by
    ``policy`` when given."""
    iam = boto3.client("iam", region_name=R)
    role = iam_plan.role_name(s)
    if policy is not None:
        iam.put_role_policy(RoleName=role, PolicyName=iam_plan.POLICY_NAME, PolicyDocument=json.dumps(policy))
    return standin_server.assumed_role_env(f"arn:aws:iam::{ACCOUNT}:role/{role}", "eks-pod-identity")


def _pod_env(pod) -> dict:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0].get("env") or [] if "value" in e}


def test_a_denied_storage_stops_up_before_the_gpu_nodegroup_and_deletes_the_pod(srv, tmp_path, monkeypatch):
    import moto.settings

    from tests.unit.plan.test_s3_access import OLD_POLICY

    old = json.loads(json.dumps(OLD_POLICY).replace("ckpt-bucket", BUCKET).replace("team/raytrain", "raytrain"))
    s = placed(tmp_path)

    def as_pod(pod, argv):  # the pod runs as the storage role, which holds the old prefix-only policy; moto enforces
        if argv[:2] != ["python3", "-c"]:
            return None
        env = {k: v for k, v in os.environ.items() if k != "AWS_SESSION_TOKEN"} | _pod_env(pod) | _role_session(s, old)
        monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
        try:
            done = subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True, text=True, timeout=60)
        finally:
            monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", float("inf"))
        return done.stdout, done.stderr, done.returncode

    st = _k8s(monkeypatch, exec_handler=as_pod)
    try:
        res = aws_target.cluster(s, "up", assume_yes=True)
        assert not res.ok
        first = res.problems[0]
        assert first.startswith(f"Ray pod {POD}: create_dir on s3://{BUCKET}/raytrain/ failed: HeadBucket"), first
        assert "the pod's role lacks s3:ListBucket" in first and "Fix: re-run notebook 02" in first
        assert first.endswith("the GPU node group was not created (no GPU time was spent)")
        role = iam_plan.role_name(s)
        assert any(
            c.startswith(f"storage check in {POD}: identity: OK (runs as arn:aws:sts::{ACCOUNT}:assumed-role/{role}/")
            for c in res.causes
        ), res.causes
        assert any(f"storage check in {POD}: create_dir: FAILED" in c for c in res.causes), res.causes
        assert not any("wrong identity" in c for c in [*res.causes, *res.problems])
        assert ops(srv) == ["create cluster"] and _nodegroups() == ["system"]
        assert POD not in _pods(st)
    finally:
        st.stop()


def test_a_pod_created_before_the_association_is_effective_is_created_again_then_passes(srv, tmp_path, monkeypatch):
    made = []

    def late(ns, sa):  # EKS Pod Identity: the association is effective from the second pod on
        made.append((ns, sa))
        return standin_server.association_role(ns, sa) if len(made) > 1 else None

    monkeypatch.setattr(storage_gate, "INJECTION_WAIT_S", 0.1)
    st = _k8s(monkeypatch, pod_identity=late)
    logged: list[str] = []
    try:
        s = placed(tmp_path)
        res = aws_target.cluster(s, "up", assume_yes=True)
        assert res.ok, (res.problems, res.causes)
        runs = [argv for pod, argv in st.cluster.exec_log if pod == POD and argv[:2] == ["python3", "-c"]]
        assert len(runs) == 2  # the first pod had no credentials, the second passed
        assert any(a.startswith(f"storage check from pod {POD}") and "assumed-role/" in a for a in res.actions)
        ok, lines = storage_gate.run(s, poll_s=0.05, log=logged.append)  # again: injected at once, one pod
        assert ok and not any("creating it again" in x for x in logged), logged
    finally:
        st.stop()


def test_a_pod_running_as_the_node_role_is_wrong_identity_not_a_missing_permission(srv, tmp_path, monkeypatch):
    iam = boto3.client("iam", region_name=R)
    node_role = iam.create_role(
        RoleName="eksctl-raytrain-tutorial-nodegroup-system-NodeInstanceRole-1",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    monkeypatch.setattr(storage_gate, "INJECTION_WAIT_S", 0.1)
    # the webhook never injects (the association is not effective), and the SDK falls back to the node's role
    st = _k8s(monkeypatch, pod_identity=lambda ns, sa: None, node_role=node_role)
    try:
        s = placed(tmp_path)
        res = aws_target.cluster(s, "up", assume_yes=True)
        assert not res.ok
        first = res.problems[0]
        assert first.startswith(f"Ray pod {POD}: wrong identity, not a missing permission: EKS Pod Identity did not")
        assert f"assumed-role/{node_role.split('/')[-1]}/" in first and iam_plan.role_name(s) in first
        assert "aws eks list-pod-identity-associations --cluster-name raytrain-tutorial" in first
        assert "lacks" not in first and not any("lacks s3:" in c for c in res.causes)
        assert any(c.startswith(f"storage check in {POD}: identity: FAILED - wrong identity") for c in res.causes)
        assert any(c == f"storage check in {POD}: create_dir: not run" for c in res.causes), res.causes
        runs = [argv for pod, argv in st.cluster.exec_log if pod == POD and argv[:2] == ["python3", "-c"]]
        assert len(runs) == storage_gate.POD_TRIES  # a new pod each time, bounded
        assert _nodegroups() == ["system"] and POD not in _pods(st)
    finally:
        st.stop()


def test_an_interrupt_during_the_check_deletes_the_pod_and_creates_no_gpu_nodegroup(srv, tmp_path, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(identity, "check_in", interrupted)
    st = _k8s(monkeypatch)
    try:
        with pytest.raises(KeyboardInterrupt):
            aws_target.cluster(placed(tmp_path), "up", assume_yes=True)
        assert POD not in _pods(st) and _nodegroups() == ["system"]
    finally:
        st.stop()


def test_a_new_gpu_nodegroup_replaces_eksctls_efa_plugin_again_where_the_tutorials_is_installed(
    srv, tmp_path, monkeypatch
):
    # as after 03 and a later `eksctl create nodegroup` (eksctl has put its own EFA plugin back)
    st = _k8s(monkeypatch, plugins_installed=True, eksctl_efa_plugin=True)
    try:
        res = aws_target.cluster(placed(tmp_path), "up", assume_yes=True)
        assert res.ok, (res.problems, res.causes)
        ds = st.objects("apps/v1", "daemonsets", "kube-system")
        assert not [d for d in ds if device_owners.is_eksctl_efa(d)]
        assert any("efa" in d["metadata"]["name"] for d in ds)  # the tutorial's stays
        assert any(a.startswith("replaced eksctl's EFA device plugin") for a in res.actions), res.actions
    finally:
        st.stop()


def test_the_check_pod_takes_its_region_from_the_settings_as_the_ray_pods_do(tmp_path):
    """Pods are denied the instance metadata service (disablePodIMDS): the check pod, like every Ray container,
    names its region and turns the SDK's metadata lookup off, so the check never waits out a metadata timeout."""
    from raytrain_helpers.plan.raycluster import render_raycluster
    from tests.fakes.aws.fixtures import make_settings

    s = make_settings(tmp_path)
    names = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")
    (check,) = storage_gate.check_pod(s)["spec"]["containers"]
    head = render_raycluster(s)["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in check.get("env", [])}
    assert {n: env.get(n) for n in names} == {n: e.get("value") for e in head["env"] for n in [e["name"]] if n in names}
    assert env["AWS_REGION"] == s.aws.region and env["AWS_EC2_METADATA_DISABLED"] == "true"
