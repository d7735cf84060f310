"""The namespace's NetworkPolicies against every pod the KubeRay operator would create, on both paths: the RayCluster
(04) and the RayJob alternative, whose cluster is named ``<rayjob name>-<5 random characters>``.

The rendered policies are evaluated as Kubernetes defines them (tests/fakes/k8s_standin/networkpolicy.py) against
the pods' labels as KubeRay v1.7.0 builds them (tests/fakes/k8s_standin/kuberay.py): every Ray pod reaches its head
and every other Ray pod on any port, the RayJob's submitter reaches the head's dashboard, the operator only the
dashboard, and nothing else in or outside the namespace gets in.
"""

from __future__ import annotations

import random
import re

import pytest

from raytrain_helpers.plan import raycluster
from raytrain_helpers.plan.ray_pods import HEAD_PORTS
from tests.fakes.k8s_standin import kuberay
from tests.fakes.k8s_standin.networkpolicy import Pod, admits
from tests.helpers import aws_settings

DASHBOARD, GCS, WORKER_PORT = 8265, 6379, 10002  # a Ray worker port (10002-19999) / NCCL's bootstrap


def ray_pods(path: str, settings) -> tuple[list[Pod], list[Pod]]:
    """(the Ray pods, the other pods the path creates in the namespace) as the operator would create them."""
    ns = settings.kubernetes.namespace
    if path == "RayCluster":
        rc = raycluster.render_raycluster(settings)
        name, spec, others = rc["metadata"]["name"], rc["spec"], []
    else:
        job = raycluster.render_rayjob(settings, working_dir="s3://bucket/raytrain/job.zip")
        job["metadata"]["uid"] = "6f1c1c9e-0000-4000-8000-000000000001"
        name = kuberay.rayjob_cluster_name(job, random.Random(7))
        cluster = kuberay.rayjob_cluster(job, name)
        assert cluster["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
        spec = cluster["spec"]
        others = [Pod(ns, kuberay.submitter_pod_labels(job), "submitter")]
    pods = [
        Pod(ns, labels, f"{name}-{labels['ray.io/node-type']}") for labels in kuberay.cluster_pod_labels(name, spec)
    ]
    assert {p.labels["ray.io/cluster"] for p in pods} == {name}
    return pods, others


@pytest.mark.parametrize("path", ["RayCluster", "RayJob"])
def test_every_pod_the_operator_creates_reaches_its_head_and_each_other(path):
    s = aws_settings()
    policies = raycluster.render_network_policies(s)
    pods, others = ray_pods(path, s)
    (head,) = [p for p in pods if p.labels["ray.io/node-type"] == "head"]
    workers = [p for p in pods if p is not head]
    assert len(workers) == s.aws.gpu_node_count
    for src in pods:
        for port in (*HEAD_PORTS, WORKER_PORT):
            assert admits(policies, src, head, port), (path, src.name, port)
        for dst in workers:
            assert admits(policies, src, dst, WORKER_PORT), (path, src.name, dst.name)
    for submitter in others:  # K8sJobMode: the submitter pod runs `ray job submit` against the head's dashboard
        assert admits(policies, submitter, head, DASHBOARD)
        assert not admits(policies, head, submitter, WORKER_PORT)  # it serves nothing: default deny


@pytest.mark.parametrize("path", ["RayCluster", "RayJob"])
def test_only_the_operator_reaches_the_dashboard_from_outside_and_nothing_else_gets_in(path):
    s = aws_settings()
    policies = raycluster.render_network_policies(s)
    pods, _ = ray_pods(path, s)
    (head,) = [p for p in pods if p.labels["ray.io/node-type"] == "head"]
    operator = Pod(raycluster.OPERATOR_NAMESPACE, {"app.kubernetes.io/name": "kuberay-operator"}, "operator")
    assert admits(policies, operator, head, DASHBOARD)
    assert not admits(policies, operator, head, GCS)
    stranger = Pod("default", dict(head.labels), "look-alike in another namespace")
    assert not any(admits(policies, stranger, p, port) for p in pods for port in HEAD_PORTS)
    plain = Pod(s.kubernetes.namespace, {"app": "notebook"}, "a pod that is no Ray node")
    assert not admits(policies, head, plain, 8888)


def test_a_rayjobs_cluster_is_named_after_the_rayjob_with_five_random_characters():
    s = aws_settings()
    job = raycluster.render_rayjob(s, working_dir="s3://bucket/raytrain/job.zip")
    names = {kuberay.rayjob_cluster_name(job, random.Random(seed)) for seed in range(20)}
    alphabet = re.escape(kuberay.RAND_ALPHABET)
    assert all(re.fullmatch(rf"{job['metadata']['name']}-[{alphabet}]{{5}}", n) for n in names) and len(names) > 1
    assert s.kubernetes.ray_cluster_name not in names  # so a selector on ray.io/cluster cannot admit its pods
