"""The stand-in's KubeRay operator (v1.7.0, tests/fakes/k8s_standin/kuberay.py) on both paths: a RayJob runs on a
RayCluster named ``<rayjob name>-<5 random characters>``, and the NetworkPolicies the tutorial applies admit every
pod the operator made, on the RayCluster path and on the RayJob path."""

from __future__ import annotations

import re
import time

import pytest

from raytrain_helpers.clients import kubernetes as kube
from raytrain_helpers.plan import raycluster as plan
from raytrain_helpers.plan.ray_pods import HEAD_PORTS
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay_step
from tests.fakes.k8s_standin import kuberay, standin
from tests.fakes.k8s_standin.networkpolicy import Pod, admits
from tests.helpers import aws_settings

READY_OP = dict(plugins_installed=True, delay_s=0.1, operator_installed=True)


@pytest.fixture(autouse=True)
def _only_the_fake_helm(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def pods_of(st, ns: str, cluster: str, want: int, timeout_s: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pods = [p for p in st.objects("v1", "pods", ns) if p["metadata"]["labels"].get("ray.io/cluster") == cluster]
        if len(pods) >= want:
            return pods
        time.sleep(0.05)
    raise AssertionError(f"{want} pods of {cluster} did not appear")


def assert_admitted(st, ns: str, pods: list[dict]) -> None:
    policies = st.objects("networking.k8s.io/v1", "networkpolicies", ns)
    ray = [Pod(ns, p["metadata"]["labels"], p["metadata"]["name"]) for p in pods]
    (head,) = [p for p in ray if p.labels["ray.io/node-type"] == "head"]
    for src in ray:
        assert all(admits(policies, src, head, port) for port in HEAD_PORTS), src.name
        assert all(admits(policies, src, dst, 10002) for dst in ray), src.name


def test_a_rayjob_runs_on_a_cluster_named_after_it_whose_pods_the_policies_admit():
    s = aws_settings()
    ns = s.kubernetes.namespace
    with standin("healthy", set_env=True, **READY_OP) as st:
        client = kube.api_client(s)
        for obj in [plan.render_namespace(s), *plan.render_network_policies(s)]:
            kube.apply(client, obj)
        job = plan.render_rayjob(s, working_dir="s3://bucket/raytrain/job.zip")
        kube.apply(client, job)
        deadline = time.monotonic() + 10
        while not (st.get("ray.io/v1", "rayjobs", job["metadata"]["name"], ns).get("status") or {}).get(
            "rayClusterName"
        ):
            assert time.monotonic() < deadline, "the RayJob got no cluster"
            time.sleep(0.05)
        name = st.get("ray.io/v1", "rayjobs", job["metadata"]["name"], ns)["status"]["rayClusterName"]
        assert re.fullmatch(rf"{job['metadata']['name']}-[{kuberay.RAND_ALPHABET}]{{5}}", name)
        rc = st.get("ray.io/v1", "rayclusters", name, ns)
        assert rc["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
        assert rc["metadata"]["labels"]["ray.io/originated-from-cr-name"] == job["metadata"]["name"]
        pods = pods_of(st, ns, name, 1 + s.aws.gpu_node_count)
        assert all(p["metadata"]["labels"]["app.kubernetes.io/part-of"] == "raytrain-tutorial" for p in pods)
        assert_admitted(st, ns, pods)
        client.close()


def test_the_rayclusters_pods_carry_kuberays_labels_and_the_policies_admit_them():
    s = aws_settings()
    ns, name = s.kubernetes.namespace, s.kubernetes.ray_cluster_name
    with standin("healthy", set_env=True, **READY_OP) as st:
        assert kuberay_step.raycluster(s, timeout_s=5, poll_s=0.05, log=lambda *a: None).ok
        pods = pods_of(st, ns, name, 1 + s.aws.gpu_node_count)
        for p in pods:
            labels = p["metadata"]["labels"]
            assert (
                labels["ray.io/is-ray-node"] == "yes" and labels["app.kubernetes.io/created-by"] == "kuberay-operator"
            )
            assert labels["ray.io/identifier"] == f"{name}-{labels['ray.io/node-type']}"
        assert_admitted(st, ns, pods)
