"""plan.kube_objects: what Kubernetes objects (plain dicts) say, without an API."""

from __future__ import annotations

import pytest

from raytrain_helpers.plan import kube_objects as ko


def node(labels=None, taints=None, allocatable=None):
    return {
        "metadata": {"name": "n1", "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": allocatable or {}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.mark.parametrize("text,value", [("4", 4.0), ("500m", 0.5), ("16Gi", 16 * 2**30), (None, 0.0), (2, 2.0)])
def test_quantity(text, value):
    assert ko.quantity(text) == value


def test_node_row():
    row = ko.node_row(
        node(
            {"role": "gpu-worker", "node.kubernetes.io/instance-type": "g6.12xlarge"},
            allocatable={"cpu": "47", "nvidia.com/gpu": "4", "vpc.amazonaws.com/efa": "1"},
        )
    )
    assert (row["name"], row["role"], row["instance_type"], row["zone"], row["ready"]) == (
        "n1",
        "gpu-worker",
        "g6.12xlarge",
        "?",
        True,
    )
    assert (row["cpu"], row["gpus"], row["efa"]) == (47.0, 4, 1)


def test_tolerations_against_taints():
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert ko.toleration_matches({"key": "nvidia.com/gpu", "operator": "Exists"}, taint)
    assert ko.toleration_matches({"operator": "Exists"}, taint)
    assert not ko.toleration_matches({"key": "nvidia.com/gpu", "value": "false"}, taint)
    assert not ko.toleration_matches({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, taint)
    n = node(
        taints=[taint, {"key": "soft", "effect": "PreferNoSchedule"}, {"key": "d", "value": "x", "effect": "NoExecute"}]
    )
    spec = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    assert ko.untolerated_taint_texts(spec, n) == ["untolerated taint d=x:NoExecute"]
    assert ko.tolerates(spec, "nvidia.com/gpu") and not ko.tolerates(spec, "aws.amazon.com/efa")


def test_selector_misses():
    n = node({"role": "system", "node.kubernetes.io/instance-type": "m7i.xlarge"})
    spec = {
        "nodeSelector": {"role": "gpu-worker", "zone": "a"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list("abcde")}
                            ]
                        },
                        {"matchExpressions": [{"key": "gpu.present", "operator": "Exists"}]},
                    ]
                }
            }
        },
    }
    assert ko.selector_misses(spec, n) == [
        "label role=gpu-worker (nodeSelector) is role=system",
        "label zone=a (nodeSelector) missing",
        "required node affinity: node.kubernetes.io/instance-type In [a,b,c,d,... (5 values)] (node has "
        "node.kubernetes.io/instance-type=m7i.xlarge) OR gpu.present Exists [] (node lacks it)",
    ]
    assert ko.selector_misses({"nodeSelector": {"role": "system"}}, n) == []


def test_pod_problem_and_readiness():
    pending = {
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes"}],
        }
    }
    assert ko.pod_problem(pending) == "unschedulable: 0/3 nodes"
    crashing = {
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "c", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}},
                {
                    "name": "d",
                    "state": {"running": {}},
                    "ready": False,
                    "restartCount": 2,
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
                },
            ],
        }
    }
    assert ko.pod_problem(crashing) == (
        "container c waiting: CrashLoopBackOff (back-off); "
        "container d running but not ready (restarts 2, last exit Error 1)"
    )
    assert ko.pod_problem({"status": {"phase": "Unknown"}}) == "phase Unknown"
    ended = {
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "c", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}],
        }
    }
    assert ko.pod_problem(ended) == "container c terminated: OOMKilled exit 137"
    assert not ko.pod_ready(crashing) and ko.pod_ready(
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )


def test_containers_env_and_labels():
    spec = {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}, {"value": "nameless"}]}, {"name": "b"}]}
    assert ko.container_of(spec)["name"] == "a" and ko.container_of(spec, "b")["name"] == "b"
    assert ko.container_of({}) == {} and ko.env_of(ko.container_of(spec)) == {"X": "1"}
    ds = {
        "metadata": {"name": "d", "namespace": "kube-system", "labels": {ko.PART_OF_LABEL: ko.PART_OF}},
        "spec": {"selector": {"matchLabels": {"a": "1", "b": "2"}}, "template": {"spec": spec}},
    }
    assert ko.match_labels_selector(ds) == "a=1,b=2" and ko.pod_template_spec(ds) is spec
    assert ko.is_part_of_tutorial(ds) and not ko.is_part_of_tutorial(None) and not ko.is_part_of_tutorial({})
    assert (ko.name_of(ds), ko.namespace_of(ds), ko.name_of({})) == ("d", "kube-system", "?")
