"""The RayCluster's pods on aws: which they are (KubeRay's labels), where they run, whether the nodes can take
them right now (:func:`preflight`: the live allocatable minus what already runs), and why they are not ready
(:func:`diagnose_cluster`: the scheduler's words, the node that rejects a pod, the fix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....clients import kubernetes as kube
from ....core.config import Settings
from ....plan.kube_objects import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    container_of,
    labels,
    name_of,
    node_row,
    phase_of,
    pod_problem,
    pod_ready,
    quantity,
    selector_misses,
    untolerated_taint_texts,
)
from ....plan.raycluster import OPERATOR_REQUESTS, group_pod_spec
from .operator import deployment_ready, find_operator

_DONE_PHASES = ("Succeeded", "Failed")


# ============================================================================================
# Cluster facts
# ============================================================================================


def cluster_selector(settings: Settings) -> str:
    return f"ray.io/cluster={settings.kubernetes.ray_cluster_name}"


def cluster_pods(client, settings: Settings) -> list[dict]:
    """The RayCluster's pods (head and workers)."""
    return kube.list_objects(
        client, "v1", "Pod", settings.kubernetes.namespace, label_selector=cluster_selector(settings)
    )


def pod_role(pod: dict) -> str:
    """``head`` or ``worker`` (KubeRay's ``ray.io/node-type`` label)."""
    return labels(pod).get("ray.io/node-type", "?")


def placement(pods: list[dict], nodes: list[dict]) -> list[dict[str, Any]]:
    """One row per pod (head first): its phase, readiness and the node, instance type and zone it runs on."""
    by_name = {name_of(n): node_row(n) for n in nodes}
    out = []
    for pod in sorted(pods, key=lambda x: (pod_role(x) != "head", name_of(x))):
        node = (pod.get("spec") or {}).get("nodeName") or ""
        row = by_name.get(node, {})
        out.append(
            dict(
                pod=name_of(pod),
                role=pod_role(pod),
                phase=(pod.get("status") or {}).get("phase", "?"),
                ready=pod_ready(pod),
                node=node or "(not scheduled)",
                instance_type=row.get("instance_type", "-"),
                zone=row.get("zone", "-"),
            )
        )
    return out


def pod_requests(pod: dict) -> dict[str, float]:
    """The sum of the pod's containers' requests, by resource."""
    total: dict[str, float] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[k] = total.get(k, 0.0) + quantity(v)
    return total


def _format_amount(resource: str, value: float) -> str:
    if resource == "memory":
        return f"{value / 2**30:.1f}Gi"
    if resource == "cpu":
        return f"{value:g}"
    return f"{int(value)}"


def _container_requests(pod_spec: dict) -> dict[str, float]:
    requests = (container_of(pod_spec).get("resources") or {}).get("requests", {})
    return {k: quantity(v) for k, v in requests.items()}


# ============================================================================================
# Preflight: can the pods be placed right now?
# ============================================================================================


@dataclass
class NodeUse:
    """What the pods already running hold on each node (the RayCluster's own pods, ``ours``, excluded)."""

    pods: list[dict]
    ours: set[str]

    def _others_on(self, node: dict) -> list[dict]:
        return [
            p
            for p in self.pods
            if (p.get("spec") or {}).get("nodeName") == name_of(node)
            and name_of(p) not in self.ours
            and phase_of(p) not in _DONE_PHASES
        ]

    def free_on(self, node: dict) -> dict[str, float]:
        alloc = {k: quantity(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
        for pod in self._others_on(node):
            for k, v in pod_requests(pod).items():
                alloc[k] = alloc.get(k, 0.0) - v
        return alloc

    def _shortfall(self, node: dict, resource: str, wanted: float, free: float) -> str:
        alloc = quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource))
        msg = (
            f"{resource} free {_format_amount(resource, free)} of allocatable {_format_amount(resource, alloc)}, "
            f"needs {_format_amount(resource, wanted)}"
        )
        if alloc + 1e-9 >= wanted:  # the node has it, other pods hold it
            users = [name_of(p) for p in self._others_on(node) if pod_requests(p).get(resource)]
            msg += f" (held by {', '.join(users[:4])}{'...' if len(users) > 4 else ''})"
        return msg

    def shortfalls(self, node: dict, requests: dict[str, float], pod_spec: dict) -> list[str]:
        """Why a pod with these requests and this spec cannot be placed on the node ([] = it can)."""
        free = self.free_on(node)
        missing = [
            self._shortfall(node, resource, wanted, free.get(resource, 0.0))
            for resource, wanted in requests.items()
            if free.get(resource, 0.0) + 1e-9 < wanted
        ]
        return missing + untolerated_taint_texts(pod_spec, node)


def preflight(client, settings: Settings, rc: dict, *, operator_present: bool) -> list[str]:
    """Can the RayCluster's pods be placed right now? Checks live allocatable minus what already runs."""
    nodes = kube.list_objects(client, "v1", "Node")
    pods = kube.list_objects(client, "v1", "Pod")
    cluster_name = settings.kubernetes.ray_cluster_name
    use = NodeUse(pods, {name_of(p) for p in pods if labels(p).get("ray.io/cluster") == cluster_name})
    spec = rc["spec"]
    head_spec = group_pod_spec(spec["headGroupSpec"])
    head_requests = _container_requests(head_spec)
    if not operator_present:
        head_requests["cpu"] = head_requests.get("cpu", 0) + OPERATOR_REQUESTS[0] / 1000
        head_requests["memory"] = head_requests.get("memory", 0) + OPERATOR_REQUESTS[1] * 2**30
    worker_spec = group_pod_spec(spec["workerGroupSpecs"][0])
    return _head_placement_problems(nodes, use, head_requests, head_spec, settings, operator_present) + (
        _worker_placement_problems(nodes, use, _container_requests(worker_spec), worker_spec, settings)
    )


def _head_placement_problems(
    nodes: list[dict], use: NodeUse, requests: dict, pod_spec: dict, settings: Settings, operator_present: bool
) -> list[str]:
    system_nodes = [n for n in nodes if labels(n).get("role") == "system"]
    if not system_nodes:
        return [
            "no node is labelled role=system: the head (and the operator) have nowhere to run. "
            "Fix: the system nodegroup needs the label role=system (notebook 02)"
        ]
    why = {name_of(n): use.shortfalls(n, requests, pod_spec) for n in system_nodes}
    if not all(why.values()):
        return []
    return [
        f"system node {node} cannot take the Ray head"
        + (" and the operator" if not operator_present else "")
        + ": "
        + "; ".join(reasons)
        + f". Fix: a larger SYSTEM_NODE_TYPE than {settings.aws.system_node_type}, or fewer pods on it"
        for node, reasons in why.items()
    ]


def _shortfall_hint(reasons: list[str]) -> str:
    if any((x.startswith(GPU_RESOURCE) or x.startswith(EFA_RESOURCE)) and "held by" not in x for x in reasons):
        return " -> the device plugins are missing or unhealthy: run notebook 03 (plugins.step)"
    if any("held by" in x for x in reasons):
        return (
            " -> other pods hold it (a RayJob's cluster, an earlier RayCluster under another name?): delete them first"
        )
    return ""


def _worker_placement_problems(
    nodes: list[dict], use: NodeUse, requests: dict, pod_spec: dict, settings: Settings
) -> list[str]:
    gpu_nodes = [n for n in nodes if labels(n).get("role") == "gpu-worker"]
    need = settings.aws.gpu_node_count
    fit, reasons = 0, []
    for node in gpu_nodes:
        missing = use.shortfalls(node, requests, pod_spec)
        if not missing:
            fit += 1
        else:
            reasons.append(f"GPU node {name_of(node)}: " + "; ".join(missing) + _shortfall_hint(missing))
    if fit >= need:
        return []
    return [
        f"only {fit} of the {len(gpu_nodes)} GPU node(s) (role=gpu-worker) can take a worker pod; "
        f"GPU_NODE_COUNT = {need}" + ("" if gpu_nodes else ". Fix: create the GPU nodegroup (notebook 02)")
    ] + reasons


# ============================================================================================
# Why the pods are not ready
# ============================================================================================


def _pending_fix(message: str) -> str | None:
    low = message.lower()
    if "taint" in low:
        return (
            "  Fix: the nodes carry a taint the pod does not tolerate: remove it (`kubectl taint nodes "
            "NODE KEY-`) or add a toleration to manifests/_raycluster_spec.j2"
        )
    if "insufficient nvidia.com/gpu" in low or "insufficient vpc.amazonaws.com/efa" in low:
        return "  Fix: the device plugins do not advertise the GPUs/EFA: run notebook 03 (plugins.step)"
    if "affinity/selector" in low:
        return (
            "  Fix: no node has the label the pod selects (role=system / role=gpu-worker): check the "
            "nodegroup labels (notebook 02)"
        )
    if "insufficient" in low:
        return "  Fix: the pod's cpu/memory requests exceed the node's free allocatable"
    return None


def _diagnose_pending(pod: dict, role: str, nodes: list[dict]) -> list[str]:
    """A Pending pod: the scheduler's words, then which node rejects it and why, then the fix."""
    message = pod_problem(pod)
    out = [f"{role} pod {name_of(pod)} Pending: {message}"]
    spec = pod.get("spec") or {}
    candidates = [n for n in nodes if labels(n).get("role") == ("system" if role == "head" else "gpu-worker")]
    for node in candidates or nodes:
        why = untolerated_taint_texts(spec, node) + selector_misses(spec, node)
        if why:
            out.append(f"  node {name_of(node)}: " + "; ".join(why))
    fix = _pending_fix(message)
    return out + ([fix] if fix else [])


def diagnose_cluster(client, settings: Settings, pods: list[dict], nodes: list[dict], rc_live: dict) -> list[str]:
    """Why the RayCluster is not ready: no pods, Pending pods, a head that is not Ready, missing workers."""
    status = rc_live.get("status") or {}
    if not pods:
        dep = find_operator(client)
        return [
            "the KubeRay operator created no pods for the RayCluster"
            + (f" (RayCluster state {status.get('state')!r}, reason {status.get('reason')!r})" if status else "")
            + (
                "; the operator Deployment is missing"
                if dep is None
                else ""
                if deployment_ready(dep)
                else "; the operator is not Ready"
            )
        ]
    out = [] if any(pod_role(p) == "head" for p in pods) else ["no head pod exists"]
    for pod in pods:
        phase, role = phase_of(pod), pod_role(pod)
        if phase == "Pending":
            out += _diagnose_pending(pod, role, nodes)
        elif role == "head" and not pod_ready(pod):
            out.append(
                f"head pod {name_of(pod)} is {phase} but not Ready: {pod_problem(pod) or 'no reason given'}"
                f". Fix: read its log (`kubectl logs -n {settings.kubernetes.namespace} {name_of(pod)}`); "
                f"common causes: RAY_VERSION differs from the image's Ray, the GCS cannot start (memory), "
                f"the image could not be pulled"
            )
        elif phase != "Running":
            out.append(f"{role} pod {name_of(pod)} is {phase}: {pod_problem(pod)}")
    workers = [p for p in pods if pod_role(p) == "worker"]
    if len(workers) < settings.aws.gpu_node_count:
        out.append(f"only {len(workers)} worker pod(s) exist, GPU_NODE_COUNT = {settings.aws.gpu_node_count}")
    return out


__all__ = [
    "NodeUse",
    "cluster_pods",
    "cluster_selector",
    "diagnose_cluster",
    "placement",
    "pod_requests",
    "pod_role",
    "preflight",
]
