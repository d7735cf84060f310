"""Exactly one device plugin per resource on every GPU node: who installed each plugin DaemonSet, which one serves
each node, and the replacement of the EFA device plugin that eksctl installs by itself.

With ``efaEnabled: true`` eksctl creates - or replaces, by an HTTP PUT of the whole object - the DaemonSet
``kube-system/aws-efa-k8s-device-plugin`` on ``create cluster`` and again on every ``create nodegroup``; no flag
turns it off (eksctl-io/eksctl at 99984adb, 2026-08-21: pkg/eks/tasks.go ``ClusterTasksForNodeGroups``,
pkg/addons/device_plugin.go ``applyDevicePlugin`` -> ``CreateOrReplace``, pkg/addons/assets/efa-device-plugin.yaml;
https://github.com/eksctl-io/eksctl/issues/8089). Its image is v0.5.4 and its instance-type allowlist lacks the p6
and g7 types. Two plugins for one resource on a node register the same kubelet socket and the last to register
wins, so step 03 replaces eksctl's copy deliberately: it deletes that DaemonSet (recognised by its name, its image
and the absence of Helm's labels) and installs its own Helm release under another name, which eksctl's PUT never
touches. eksctl re-creates its copy at the next ``create nodegroup`` of an EFA node group: step 03, run again,
replaces it again, and fails with a named fix while two plugins serve one node. Teardown removes only the
tutorial's own plugins: eksctl's copy, when eksctl re-created it, goes with ``eksctl delete cluster``; a plugin
someone else installed is never deleted.
"""

from __future__ import annotations

from typing import Any

from ....clients import kubernetes as kube
from ....plan.kube_objects import labels, name_of, pod_problem, pod_ready
from ....plan.plugins import EFA_CHART, EKSCTL_EFA_DAEMONSET, EKSCTL_EFA_IMAGE_TAG, NAMESPACE, NVIDIA_CHART

TUTORIAL, EKSCTL, OTHER = "the tutorial", "eksctl", "someone else"
#: The path of eksctl's image (``<EKS account>.dkr.ecr.<region>.<suffix>/eks/aws-efa-k8s-device-plugin:<tag>``).
EKSCTL_IMAGE_PATH = "/eks/aws-efa-k8s-device-plugin:"
RELEASES = {"nvidia": NVIDIA_CHART["release"], "efa": EFA_CHART["release"]}
TITLES = {"nvidia": "NVIDIA device plugin", "efa": "EFA device plugin"}


def images(ds: dict) -> str:
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return " ".join(c.get("image", "") for c in spec.get("containers") or [])


def plugin_key(ds: dict) -> str | None:
    """'nvidia' or 'efa' for a device plugin DaemonSet (by its name or its image), else None."""
    name, image = name_of(ds), images(ds)
    if "efa-k8s-device-plugin" in name or "efa-k8s-device-plugin" in image:
        return "efa"
    if "nvidia-device-plugin" in name or ("k8s-device-plugin" in image and "nvidia" in image):
        return "nvidia"
    return None


def is_helm(ds: dict) -> bool:
    return labels(ds).get("app.kubernetes.io/managed-by") == "Helm"


def helm_release(ds: dict) -> str | None:
    return ((ds.get("metadata") or {}).get("annotations") or {}).get("meta.helm.sh/release-name")


def is_eksctl_efa(ds: dict) -> bool:
    """eksctl's own EFA plugin: its name in kube-system, its image path, no Helm label (eksctl's asset sets no
    metadata labels at all)."""
    return (
        name_of(ds) == EKSCTL_EFA_DAEMONSET
        and (ds.get("metadata") or {}).get("namespace", NAMESPACE) == NAMESPACE
        and not is_helm(ds)
        and EKSCTL_IMAGE_PATH in images(ds)
    )


def owner(ds: dict) -> str:
    """Who installed a plugin DaemonSet: the tutorial (its own Helm release), eksctl, or someone else."""
    key = plugin_key(ds)
    if is_helm(ds) and key is not None and helm_release(ds) == RELEASES[key]:
        return TUTORIAL
    if is_eksctl_efa(ds):
        return EKSCTL
    return OTHER


SHORT = {TUTORIAL: "tutorial", EKSCTL: "eksctl", OTHER: "not the tutorial's"}


def describe(ds: dict) -> str:
    """``NAME (who, TAG)``, e.g. ``aws-efa-k8s-device-plugin (eksctl, v0.5.4)``."""
    tag = images(ds).rsplit(":", 1)[-1] if ":" in images(ds) else "?"
    return f"{name_of(ds)} ({SHORT[owner(ds)]}, {tag})"


def _pods_of(ds: dict, pods: list[dict]) -> list[dict]:
    uid = (ds.get("metadata") or {}).get("uid")
    return [p for p in pods if any(r.get("uid") == uid for r in (p.get("metadata") or {}).get("ownerReferences") or [])]


def _live(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def replace_eksctl_efa(client, *, log, timeout_s: float = 90, poll_s: float = 2.0) -> list[str]:
    """Delete eksctl's EFA plugin DaemonSet (and wait, up to ``timeout_s``, for its pods to go, so that they do not
    hold the kubelet's socket while the tutorial's plugin registers). Returns what it replaced, for the step's notes."""
    notes = []
    for ds in kube.list_objects(client, "apps/v1", "DaemonSet", NAMESPACE):
        if not is_eksctl_efa(ds):
            continue
        kube.delete(client, "apps/v1", "DaemonSet", name_of(ds), NAMESPACE)
        log(f"deleted eksctl's DaemonSet {NAMESPACE}/{name_of(ds)} ({images(ds)}): the tutorial's replaces it")

        def gone(ds=ds):
            pods = kube.list_objects(client, "v1", "Pod", NAMESPACE)
            return not [p for p in _pods_of(ds, pods) if _live(p)], None

        kube.wait_for(gone, timeout_s=timeout_s, interval_s=poll_s)
        notes.append(
            f"replaced eksctl's EFA device plugin {NAMESPACE}/{name_of(ds)} (image {images(ds).rsplit(':', 1)[-1]}; "
            f"eksctl's {EKSCTL_EFA_IMAGE_TAG} asset has an instance-type allowlist without the p6 and g7 types): two "
            f"plugins on one node share the kubelet's socket and the last to register wins"
        )
    return notes


def _double_fix(servers: list[dict]) -> str:
    owners = {owner(d) for d in servers}
    if EKSCTL in owners:
        return (
            "Fix: run step 03 again (plugins.devices): it replaces eksctl's copy, which eksctl re-creates at every "
            "`eksctl create nodegroup` of an EFA node group"
        )
    others = [name_of(d) for d in servers if owner(d) == OTHER]
    return (
        f"Fix: remove the plugin the tutorial did not install if it is yours to remove (`kubectl -n {NAMESPACE} "
        f"delete daemonset {others[0] if others else '...'}`, or `helm uninstall` its release); the tutorial never "
        f"deletes it"
    )


def _not_ready_fix(problem: str) -> str:
    if "ImagePull" in problem or "ErrImage" in problem:
        return (
            " -> the node cannot pull the plugin's image. Fix: a chart version whose image tag exists in the region's "
            "EKS registry (versions.efa_device_plugin_version / nvidia_device_plugin_version, docs/pins.md), and a "
            "route from the nodes to ECR"
        )
    if "CrashLoopBackOff" in problem:
        return " -> the plugin exits: `kubectl -n kube-system logs` of the pod says why (no device, no driver)"
    return ""


def serving(daemonsets: list[dict], pods: list[dict], gpu_nodes: list[dict]) -> tuple[list[dict[str, Any]], list[str]]:
    """Per GPU node and resource, the plugin DaemonSets whose pods run there; the problems: two plugins serve one
    node, or the tutorial's own plugin pod there is not Ready."""
    rows, problems = [], []
    for node in gpu_nodes:
        node_name = name_of(node)
        row: dict[str, Any] = {"node": node_name}
        for key in ("nvidia", "efa"):
            servers, mine = [], []
            for ds in daemonsets:
                if plugin_key(ds) != key:
                    continue
                here = [p for p in _pods_of(ds, pods) if (p.get("spec") or {}).get("nodeName") == node_name]
                if any((p.get("status") or {}).get("phase") == "Running" for p in here):
                    servers.append(ds)  # its container started there: it registers with that kubelet
                mine += [p for p in here if owner(ds) == TUTORIAL and _live(p)]
            row[key] = ", ".join(describe(d) for d in servers) or "none"
            if len(servers) > 1:
                problems.append(
                    f"node {node_name}: {len(servers)} {TITLES[key]}s serve it ({row[key]}); they share the kubelet's "
                    f"socket and the last to register wins. {_double_fix(servers)}"
                )
            for pod in mine:
                if not pod_ready(pod):
                    problem = pod_problem(pod) or "not Ready"
                    problems.append(
                        f"the tutorial's {TITLES[key]} pod {name_of(pod)} on {node_name} is not Ready: {problem}"
                        f"{_not_ready_fix(problem)}"
                    )
        rows.append(row)
    return rows, problems


__all__ = [
    "EKSCTL",
    "OTHER",
    "TUTORIAL",
    "describe",
    "helm_release",
    "images",
    "is_eksctl_efa",
    "is_helm",
    "owner",
    "plugin_key",
    "replace_eksctl_efa",
    "serving",
]
