"""plan.raycluster_checks: the structural checks of a rendered RayCluster, each check group on its own (the
schemas are tests/unit/plan/test_manifests.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raytrain_helpers.plan import ray_pods, raycluster, raycluster_checks
from tests.helpers import aws_settings

REPO = Path(__file__).resolve().parents[3]


settings = aws_settings


def _worker(rc):
    return rc["spec"]["workerGroupSpecs"][0]


def _head(rc):
    return rc["spec"]["headGroupSpec"]


def _env_set(rc, name, value):
    for e in _worker(rc)["template"]["spec"]["containers"][0]["env"]:
        if e["name"] == name:
            e["value"] = value


# --------------------------------------------------------------------------------------------
# The structural checks, one group at a time
# --------------------------------------------------------------------------------------------


def test_a_rendered_cluster_passes_every_check_group():
    s = settings()
    rc = raycluster.render_raycluster(s)
    assert raycluster_checks.check_cluster_fields(rc["spec"], s, "RayCluster") == []
    assert raycluster_checks.check_head_scheduling(_head(rc), s) == []
    assert raycluster_checks.check_head_container(_head(rc), s) == []
    assert raycluster_checks.check_worker_scheduling(_worker(rc), s) == []
    assert raycluster_checks.check_worker_devices(_worker(rc), s) == []
    assert raycluster_checks.check_worker_runtime(_worker(rc)) == []
    assert raycluster_checks.check_raycluster({"apiVersion": "v1", "kind": "Pod"}, s)[0].startswith("not a ray.io/v1")


def test_cluster_fields():
    s = settings()
    spec = {"rayVersion": "2.9.0", "enableInTreeAutoscaling": True}
    problems = raycluster_checks.check_cluster_fields(spec, s, "RayJob.rayClusterSpec")
    assert problems[0].startswith("RayJob.rayClusterSpec.spec.rayVersion = '2.9.0' but RAY_VERSION is '2.58.0'")
    assert "enableInTreeAutoscaling: false" in problems[1]
    assert "authOptions = None" in problems[2] and "mode: token" in problems[2]


def test_head_scheduling():
    s = settings()
    head = _head(raycluster.render_raycluster(s))
    head["serviceType"] = "LoadBalancer"
    del head["template"]["spec"]["nodeSelector"]
    problems = raycluster_checks.check_head_scheduling(head, s)
    assert len(problems) == 2 and "exposes the dashboard" in problems[0] and "role=system" in problems[1]


def test_head_container():
    s = settings()
    head = _head(raycluster.render_raycluster(s))
    c = head["template"]["spec"]["containers"][0]
    c["ports"] = [p for p in c["ports"] if p["containerPort"] != 8265]
    c["env"] = []
    c.pop("lifecycle")
    problems = raycluster_checks.check_head_container(head, s)
    assert any("container port 8265 is not declared" in p for p in problems)
    assert any("NVIDIA_VISIBLE_DEVICES=void" in p for p in problems)
    assert any("preStop" in p for p in problems)
    assert len(problems) == 3
    c["resources"]["limits"]["cpu"] = "3"
    c["resources"]["requests"]["cpu"] = "3"
    assert any("exceed what a m7i.xlarge leaves free" in p for p in raycluster_checks.check_head_container(head, s))


def test_worker_scheduling():
    s = settings()
    group = _worker(raycluster.render_raycluster(s))
    group["rayStartParams"]["num-gpus"] = "2"
    group["template"]["spec"]["tolerations"] = []
    problems = raycluster_checks.check_worker_scheduling(group, s)
    assert problems[0] == "worker group 'gpu-efa': rayStartParams num-gpus = '2', GPUS_PER_NODE = 4"
    assert [p for p in problems if "no toleration" in p] == problems[1:] and len(problems) == 3


def test_worker_devices():
    s = settings()
    group = _worker(raycluster.render_raycluster(s))
    c = group["template"]["spec"]["containers"][0]
    c["resources"]["requests"]["nvidia.com/gpu"] = "2"
    problems = raycluster_checks.check_worker_devices(group, s)
    assert "worker group 'gpu-efa': nvidia.com/gpu = 2, GPUS_PER_NODE = 4" in problems
    assert any("nvidia.com/gpu request 2 != limit 4" in p for p in problems)


def test_worker_runtime():
    group = _worker(raycluster.render_raycluster(settings()))
    c = group["template"]["spec"]["containers"][0]
    c["env"] = [e for e in c["env"] if e["name"] not in ("NCCL_DEBUG", "NCCL_NET_PLUGIN")]
    problems = raycluster_checks.check_worker_runtime(group)
    assert problems == [
        "worker group 'gpu-efa': NCCL_NET_PLUGIN = None. Fix: NCCL_NET_PLUGIN=ofi",
        "worker group 'gpu-efa': NCCL_DEBUG is not set. Fix: NCCL_DEBUG=INFO (the transport audit reads its log)",
    ]


def test_missing_shm_volume_fails_the_check():
    s = settings()
    rc = raycluster.render_raycluster(s)
    spec = _worker(rc)["template"]["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "dshm"]
    assert any("/dev/shm" in p for p in raycluster_checks.check_raycluster(rc, s))
    rc2 = raycluster.render_raycluster(s)
    for v in _worker(rc2)["template"]["spec"]["volumes"]:
        if v["name"] == "dshm":
            v["emptyDir"].pop("medium")  # a disk-backed /dev/shm is no better
    assert any("memory-backed" in p for p in raycluster_checks.check_raycluster(rc2, s))


@pytest.mark.parametrize("value", [None, "1", "4"])
def test_head_num_gpus_must_be_zero(value):
    s = settings()
    rc = raycluster.render_raycluster(s)
    params = rc["spec"]["headGroupSpec"]["rayStartParams"]
    if value is None:
        del params["num-gpus"]
    else:
        params["num-gpus"] = value
    assert any('num-gpus must be "0"' in p for p in raycluster_checks.check_raycluster(rc, s))


def test_more_structural_failures():
    s = settings()
    cases = {
        "rayVersion": lambda rc: rc["spec"].__setitem__("rayVersion", "2.9.0"),
        "NCCL_SOCKET_IFNAME": lambda rc: _env_set(rc, "NCCL_SOCKET_IFNAME", "^lo,docker0"),
        "FI_PROVIDER": lambda rc: _env_set(rc, "FI_PROVIDER", "tcp"),
        "train_slot": lambda rc: _worker(rc)["rayStartParams"].__setitem__("resources", '{"train_slot": 4}'),
        "replicas": lambda rc: _worker(rc).__setitem__("maxReplicas", 5),
        "aws.amazon.com/efa taint": lambda rc: _worker(rc)["template"]["spec"]["tolerations"].pop(),
        "request": lambda rc: _worker(rc)["template"]["spec"]["containers"][0]["resources"]["limits"].__setitem__(
            "memory", "200Gi"
        ),
        "image": lambda rc: _worker(rc)["template"]["spec"]["containers"][0].__setitem__("image", "ray:latest"),
        "role=system": lambda rc: rc["spec"]["headGroupSpec"]["template"]["spec"].pop("nodeSelector"),
        "one worker group": lambda rc: rc["spec"]["workerGroupSpecs"].append(_worker(rc)),
        "authOptions": lambda rc: rc["spec"].pop("authOptions"),
    }
    for needle, breaker in cases.items():
        _check_breaks(s, needle, breaker)
    # the shell would read a backslash-escaped JSON, the KubeRay operator's getResourcesMap would not
    escaped = '"{\\"train_slot\\": 8}"'
    _check_breaks(s, "KubeRay operator", lambda rc: _worker(rc)["rayStartParams"].__setitem__("resources", escaped))


def _check_breaks(s, needle, breaker):
    rc = raycluster.render_raycluster(s)
    breaker(rc)
    problems = raycluster_checks.check_raycluster(rc, s)
    assert any(needle in p for p in problems), (needle, problems)


@pytest.mark.parametrize(
    "value,problems",
    [
        ("^lo,docker0,pod-id-link0", []),
        (None, ["NCCL_SOCKET_IFNAME is not set"]),
        ("^lo,docker0", ["NCCL_SOCKET_IFNAME='^lo,docker0' does not exclude pod-id-link0"]),
        ("eth0,ens5", []),
        ("=docker0,lo", ["NCCL_SOCKET_IFNAME='=docker0,lo' selects docker0, lo"]),
    ],
)
def test_socket_ifname_problems(value, problems):
    assert raycluster_checks.socket_ifname_problems(value) == problems


def test_resources_param_survives_the_shell():
    v = ray_pods.resources_param(8)
    assert raycluster_checks.parse_ray_resources(v) == {"train_slot": 8}
    # the operator parses it too (kuberay v1.7.0 pod.go getResourcesMap), and writes it this very way
    assert raycluster_checks.kuberay_resources_map(v) == {"train_slot": 8}
    assert v == """'{"train_slot":8}'"""
    # double quotes escaped for the shell: the shell reads it, the operator's JSON parse fails
    escaped = '"{\\"train_slot\\": 8}"'
    assert raycluster_checks.parse_ray_resources(escaped) == {"train_slot": 8}
    assert raycluster_checks.kuberay_resources_map(escaped) is None
    # unquoted JSON is split by the shell (or loses its quotes): what Ray would receive is not the JSON
    assert raycluster_checks.parse_ray_resources('{"train_slot": 8}') is None
    assert raycluster_checks.parse_ray_resources('{"train_slot":8}') is None
