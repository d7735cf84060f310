"""plan.workshop_namespace and plan.pod_security: an attendee's namespace, valid against the Kubernetes schemas,
labelled for Pod Security admission at the strictest level the rendered Ray pods meet, with a quota that holds
their RayCluster and RBAC that writes nothing outside it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import pod_security, raycluster, workshop_namespace
from raytrain_helpers.plan.kube_objects import quantity
from tests.unit.plan.test_manifests import core_errors

REPO = Path(__file__).resolve().parents[3]


def settings(**params):
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws", run_name="ann",
                       namespace="ray-train-ann", **params)  # fmt: skip


def ray_pod_specs(s):
    spec = raycluster.render_raycluster(s)["spec"]
    return [spec["headGroupSpec"]["template"]["spec"], *(g["template"]["spec"] for g in spec["workerGroupSpecs"])]


@pytest.mark.parametrize("gpu_node_type, gpus", [("g6.12xlarge", 4), ("p5.48xlarge", 8)])
def test_every_object_validates_against_kubernetes(gpu_node_type, gpus):
    s = settings(gpu_node_type=gpu_node_type, gpus_per_node=gpus)
    objs = workshop_namespace.namespace_objects(s, 8)
    for obj in objs:
        assert core_errors(obj) == [] and core_errors(obj, s.aws.k8s_version) == [], obj["kind"]
    ns = objs[0]["metadata"]
    assert ns["name"] == "ray-train-ann"
    assert ns["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert ns["labels"]["pod-security.kubernetes.io/warn"] == "restricted"


def test_the_ray_pods_meet_baseline_not_restricted_and_the_label_follows_them():
    s = settings()
    specs = ray_pod_specs(s)
    assert all(pod_security.baseline_problems(p) == [] for p in specs)
    why = pod_security.restricted_problems(specs[1])
    assert any("runAsNonRoot" in w for w in why) and any("drop ALL" in w for w in why)
    assert workshop_namespace.ray_pod_level(s) == "baseline"
    # a pod that mounts the node's disk or adds capabilities would not even be baseline
    bad = copy.deepcopy(specs[1])
    bad["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    bad["containers"][0]["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    problems = pod_security.baseline_problems(bad)
    assert any("hostPath" in p for p in problems) and any("SYS_ADMIN" in p for p in problems)
    assert pod_security.strictest_level([bad, *specs]) == "privileged"
    # and one hardened as restricted asks is restricted
    good = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False,
                                                             "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "v", "emptyDir": {}}]}  # fmt: skip
    assert pod_security.strictest_level([good]) == "restricted"


def test_the_quota_holds_the_raycluster_and_nothing_much_more():
    s = settings()
    hard = workshop_namespace.quota_hard(s, 8)
    spec = raycluster.render_raycluster(s)["spec"]
    groups = [(1, spec["headGroupSpec"]), *((g["replicas"], g) for g in spec["workerGroupSpecs"])]
    for res, key in (("cpu", "requests.cpu"), ("memory", "requests.memory"), ("nvidia.com/gpu", None)):
        need = sum(n * quantity(g["template"]["spec"]["containers"][0]["resources"]["requests"].get(res))
                   for n, g in groups)  # fmt: skip
        have = quantity(hard[key] if key else hard["requests.nvidia.com/gpu"])
        assert need <= have, res
        if res == "cpu":
            assert have - need == workshop_namespace.HEADROOM["cpu"]
    assert quantity(hard["requests.vpc.amazonaws.com/efa"]) == sum(
        n * quantity(g["template"]["spec"]["containers"][0]["resources"]["requests"].get("vpc.amazonaws.com/efa"))
        for n, g in groups
    )


def test_the_attendee_writes_only_in_their_namespace():
    s = settings()
    objs = {o["kind"]: o for o in workshop_namespace.namespace_objects(s, 8)}
    assert objs["Role"]["metadata"]["namespace"] == "ray-train-ann"
    writes = {"create", "update", "patch", "delete"}
    for rule in objs["ClusterRole"]["rules"]:
        assert not writes & set(rule["verbs"]), rule  # cluster-wide: read only
        if rule["resources"] == ["namespaces"]:
            assert rule["resourceNames"] == ["ray-train-ann"]  # its own Namespace object, never its labels
    for rule in objs["Role"]["rules"]:
        if set(rule["resources"]) & {"resourcequotas", "limitranges"}:
            assert not writes & set(rule["verbs"])  # cannot raise its own quota


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease", "kube-x", "default",
                                       "kuberay-system", "ray-train"])  # fmt: skip
def test_reserved_namespaces(namespace):
    assert workshop_namespace.reserved_namespace_problem(namespace, "ray-train")
    assert workshop_namespace.reserved_namespace_problem("ray-train-ann", "ray-train") is None
