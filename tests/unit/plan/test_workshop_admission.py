"""plan.workshop_admission: the ValidatingAdmissionPolicies of an attendee's namespace, valid against the Kubernetes
schema of the pinned version, and their CEL evaluated (cel-python, tests/vap.py) against good and bad Services,
RayClusters and RayJobs: the tutorial's own objects pass, every way to a Service reachable from outside or an
external IP is refused."""

from __future__ import annotations

import copy
import re

import pytest

from raytrain_helpers.plan import raycluster, workshop_admission, workshop_namespace
from raytrain_helpers.plan.kube_objects import quantity
from tests.unit.plan.test_manifests import core_errors
from tests.unit.plan.test_workshop_namespace import REPO, settings
from tests.vap import refusals

POD_IDENTITY_AGENT = "169.254.170.23"


def _policies(s):
    objs = workshop_namespace.namespace_objects(s, 8)
    return {o["metadata"]["name"].rsplit("-", 1)[-1]: o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"}


def _service(**spec):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x", "namespace": "ray-train-ann"},
            "spec": {"selector": {"app": "x"}, "ports": [{"port": 8265}], **spec}}  # fmt: skip


def test_the_policies_and_bindings_validate_and_select_only_the_attendees_namespace():
    s = settings()
    objs = workshop_namespace.namespace_objects(s, 8)
    kinds = [o["kind"] for o in objs]
    ours = [o for o in objs if o["apiVersion"] == workshop_admission.API]
    assert len(ours) == 2 * len(workshop_admission.POLICIES)
    # applied before the attendee's Role: never a moment with write access and no policy
    assert max(kinds.index(o["kind"]) for o in ours) < kinds.index("Role")
    for obj in ours:
        assert core_errors(obj) == [] and core_errors(obj, s.aws.k8s_version) == [], obj
        if obj["kind"] == "ValidatingAdmissionPolicyBinding":
            sel = obj["spec"]["matchResources"]["namespaceSelector"]
            assert sel == {"matchLabels": {"kubernetes.io/metadata.name": "ray-train-ann"}}
            assert obj["spec"]["validationActions"] == ["Deny"]
        else:
            assert obj["spec"]["failurePolicy"] == "Fail"
    names = {(v, k, n) for v, k, n in workshop_admission.admission_kinds("raytrain-attendee-ann")}
    assert names == {(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in ours}


@pytest.mark.parametrize(
    "spec",
    [{}, {"type": "ClusterIP"}, {"clusterIP": "None"}, {"type": "ClusterIP", "externalIPs": []}],
    ids=["no-type", "ClusterIP", "headless", "empty-externalIPs"],
)
def test_cluster_ip_services_are_admitted(spec):
    assert refusals(_policies(settings())["services"], _service(**spec)) == []


@pytest.mark.parametrize(
    "spec, said",
    [
        ({"type": "ClusterIP", "externalIPs": [POD_IDENTITY_AGENT]}, "externalIPs"),
        ({"externalIPs": ["10.0.3.7"]}, "externalIPs"),
        ({"type": "NodePort"}, "only ClusterIP"),
        ({"type": "LoadBalancer"}, "only ClusterIP"),
        ({"type": "ExternalName", "externalName": "example.com"}, "only ClusterIP"),
    ],
    ids=["pod-identity-agent", "another-head", "NodePort", "LoadBalancer", "ExternalName"],
)
def test_services_reachable_from_outside_or_with_external_ips_are_refused(spec, said):
    got = refusals(_policies(settings())["services"], _service(**spec))
    assert got and all("attendee's namespace" in m for m in got) and any(said in m for m in got), got


def test_the_tutorials_raycluster_and_rayjob_are_admitted():
    s = settings()
    p = _policies(s)
    assert refusals(p["rayclusters"], raycluster.render_raycluster(s)) == []
    assert refusals(p["rayjobs"], raycluster.render_rayjob(s)) == []
    # a RayJob on an existing RayCluster (clusterSelector) has no cluster spec: the policy does not apply
    job = raycluster.render_rayjob(s)
    job["spec"].pop("rayClusterSpec", None)
    job["spec"]["clusterSelector"] = {"ray.io/cluster": "x"}
    assert refusals(p["rayjobs"], job) is None


@pytest.mark.parametrize(
    "head, said",
    [
        ({"serviceType": "NodePort"}, "serviceType"),
        ({"serviceType": "LoadBalancer"}, "serviceType"),
        ({"headService": {"spec": {"type": "LoadBalancer"}}}, "headService.spec.type"),
        ({"headService": {"spec": {"externalIPs": [POD_IDENTITY_AGENT]}}}, "externalIPs"),
        ({"enableIngress": True}, "enableIngress"),
    ],
    ids=["serviceType-NodePort", "serviceType-LoadBalancer", "headService-LB", "headService-externalIPs", "ingress"],
)
def test_a_head_service_reachable_from_outside_is_refused_in_rayclusters_and_rayjobs(head, said):
    s = settings()
    p = _policies(s)
    rc = raycluster.render_raycluster(s)
    rc["spec"]["headGroupSpec"].update(copy.deepcopy(head))
    got = refusals(p["rayclusters"], rc)
    assert got and any(said in m for m in got), got
    job = raycluster.render_rayjob(s)
    if "rayClusterSpec" not in job["spec"]:
        pytest.skip("the tutorial's RayJob runs on the RayCluster: no rayClusterSpec to refuse")
    job["spec"]["rayClusterSpec"]["headGroupSpec"].update(copy.deepcopy(head))
    got = refusals(p["rayjobs"], job)
    assert got and any(said in m for m in got), got
    # a clean headService (ClusterIP, annotations) stays admitted
    rc = raycluster.render_raycluster(s)
    rc["spec"]["headGroupSpec"]["headService"] = {
        "metadata": {"annotations": {"a": "b"}},
        "spec": {"type": "ClusterIP"},
    }
    assert refusals(p["rayclusters"], rc) == []


def test_the_quota_allows_no_nodeport_or_loadbalancer_service():
    hard = workshop_namespace.quota_hard(settings(), 8)
    assert hard["services.nodeports"] == "0" and hard["services.loadbalancers"] == "0"


def test_the_node_disk_quota_holds_the_raycluster_and_every_ray_pod_states_its_own():
    """ephemeral-storage: the RayCluster's pods state requests = limits that fit the quota, the LimitRange's max and
    the GPU node's volume, and the worker's covers its Hugging Face cache volume."""
    s = settings()
    objs = {o["kind"]: o for o in workshop_namespace.namespace_objects(s, 8)}
    hard = objs["ResourceQuota"]["spec"]["hard"]
    limits = objs["LimitRange"]["spec"]["limits"][0]
    spec = raycluster.render_raycluster(s)["spec"]
    groups = [(1, spec["headGroupSpec"]), *((g["replicas"], g) for g in spec["workerGroupSpecs"])]
    need = 0
    for n, g in groups:
        res = g["template"]["spec"]["containers"][0]["resources"]
        assert res["requests"]["ephemeral-storage"] == res["limits"]["ephemeral-storage"]
        disk = quantity(res["limits"]["ephemeral-storage"])
        assert disk <= quantity(limits["max"]["ephemeral-storage"])
        need += n * disk
        for vol in g["template"]["spec"].get("volumes", []):
            if (vol.get("emptyDir") or {}).get("sizeLimit") and vol["emptyDir"].get("medium") != "Memory":
                assert quantity(vol["emptyDir"]["sizeLimit"]) < disk, vol["name"]
    for kind in ("requests", "limits"):
        have = quantity(hard[f"{kind}.ephemeral-storage"])
        assert need <= have and have - need == workshop_namespace.HEADROOM["ephemeral_gib"] * 2**30
    assert quantity(limits["default"]["ephemeral-storage"]) == quantity(limits["defaultRequest"]["ephemeral-storage"])
    worker = quantity(
        spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["ephemeral-storage"]
    )
    volume_gb = int(
        re.search(r"volumeSize: (\d+)", (REPO / "manifests" / "eksctl-gpu-nodegroup.yaml.j2").read_text())[1]
    )
    assert worker < volume_gb * 10**9 * 0.8  # room for the image and the node's own files
