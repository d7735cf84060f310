"""What stands in for the device plugins (03) and the RayCluster (04) on the local target.

No Kubernetes runs here: the local raylets stand in. Step 03 shows which devices and collective backend each
raylet offers; step 04 renders the RayCluster the aws target would apply and shows, part by part, the local
stand-in for it (head raylet with no CPUs/GPUs, worker raylets with GPUs and ``train_slot``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ...core.constants import DASHBOARD_PORT, LOOPBACK, TRAIN_SLOT
from ...core.settings import Settings
from ...plan.kube_objects import container_of
from ...plan.raycluster import render_raycluster
from ...plan.raycluster_checks import check_raycluster, group_pod_spec
from ..base import KubeRayResult, PluginsResult
from . import raylets

NOT_RUNNING = "the local cluster is not running. Fix: notebook 02 (cluster.step(settings, 'up'))"


@dataclass(frozen=True)
class LocalNode:
    """One local raylet as the stand-in views show it."""

    name: str
    role: str  # head | worker
    alive: bool
    cpus: float
    gpus: float
    train_slots: float


def local_nodes(info: Any) -> list[LocalNode]:
    """The raylets of a local cluster status (``targets.local.status``), in its order."""
    out = []
    for node in info.nodes:
        resources = node.get("resources") or {}
        out.append(
            LocalNode(
                name=node.get("name") or node["node_id"][:8],
                role=node["role"],
                alive=bool(node.get("alive")),
                cpus=resources.get("CPU", 0),
                gpus=resources.get("GPU", 0),
                train_slots=resources.get(TRAIN_SLOT, 0),
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# 03: devices
# --------------------------------------------------------------------------------------------


def device_rows(nodes: list[LocalNode]) -> list[dict[str, Any]]:
    """Per raylet: its GPUs, the collective backend a training worker there uses, its train slots, its state."""
    rows = []
    for node in nodes:
        gpus = int(node.gpus)
        backend = "-" if node.role == "head" else ("NCCL" if gpus > 0 else "gloo")
        rows.append(
            dict(
                node=node.name,
                role=node.role,
                gpus=gpus,
                backend=backend,
                train_slots=int(node.train_slots),
                state="alive" if node.alive else "DEAD",
            )
        )
    return rows


def devices(settings: Settings, *, assume_yes: bool = False) -> PluginsResult:
    """Notebook 03 on local: no plugins exist; the devices and backends each local raylet offers."""
    info = raylets.status(settings)
    rows = device_rows(local_nodes(info))
    has_slot = any(r["role"] == "worker" and r["train_slots"] > 0 and r["state"] == "alive" for r in rows)
    if not info.running:
        message = NOT_RUNNING
    elif not has_slot:
        message = f"no worker node offers a {TRAIN_SLOT}: the training job could not be placed"
    else:
        message = "Ray sees local GPUs through CUDA_VISIBLE_DEVICES; EFA has no local stand-in"
    return PluginsResult("local", "up", info.running and has_slot, message, nodes=rows)


def devices_status(settings: Settings) -> PluginsResult:
    result = devices(settings)
    result.action = "status"
    return result


def devices_teardown(settings: Settings) -> PluginsResult:
    return PluginsResult("local", "teardown", True, "nothing to delete: no device plugins on the local target")


# --------------------------------------------------------------------------------------------
# 04: the RayCluster
# --------------------------------------------------------------------------------------------


def abridged(obj: dict) -> str:
    """The parts of the RayCluster that matter, as YAML."""
    spec = obj["spec"]
    head = spec["headGroupSpec"]
    head_container = container_of(group_pod_spec(head))
    out: dict[str, Any] = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {k: obj["metadata"][k] for k in ("name", "namespace")},
        "spec": {
            "rayVersion": spec["rayVersion"],
            "headGroupSpec": {
                "rayStartParams": head.get("rayStartParams"),
                "nodeSelector": head["template"]["spec"].get("nodeSelector"),
                "image": head_container.get("image"),
                "resources": head_container.get("resources", {}).get("limits"),
            },
            "workerGroupSpecs": [_abridged_group(g) for g in spec.get("workerGroupSpecs") or []],
        },
    }
    return yaml.safe_dump(out, sort_keys=False, width=120)


def _abridged_group(group: dict) -> dict[str, Any]:
    pod_spec = group["template"]["spec"]
    container = container_of(pod_spec)
    return {
        "groupName": group["groupName"],
        "replicas": group.get("replicas"),
        "rayStartParams": group.get("rayStartParams"),
        "nodeSelector": pod_spec.get("nodeSelector"),
        "resources": container.get("resources", {}).get("limits"),
        "env": {e["name"]: e.get("value") for e in container.get("env") or []},
        "volumes": [
            v["name"] + (" (memory)" if (v.get("emptyDir") or {}).get("medium") == "Memory" else "")
            for v in pod_spec.get("volumes") or []
        ],
    }


def standin_mapping(
    settings: Settings, obj: dict, nodes: list[LocalNode], dashboard_url: str
) -> list[tuple[str, str, str]]:
    """(part of the RayCluster manifest, its local stand-in, what was found) for each part that matters."""
    head = next((n for n in nodes if n.role == "head"), None)
    workers = [n for n in nodes if n.role == "worker"]
    worker_gpus = ", ".join(str(int(w.gpus)) for w in workers) or "-"
    worker_slots = ", ".join(str(int(w.train_slots)) for w in workers) or "-"
    group = obj["spec"]["workerGroupSpecs"][0]
    return [
        (
            'headGroupSpec: head pod on the system node, num-gpus "0"',
            "head raylet (--num-cpus 0 --num-gpus 0)",
            f"CPU {head.cpus:g}, GPU {head.gpus:g}" if head else "no head",
        ),
        (
            f"workerGroupSpecs[{group['groupName']}].replicas = {group['replicas']} (one pod per GPU node)",
            f"worker raylets (local.worker_nodes = {settings.local.worker_nodes})",
            f"{len(workers)} alive" if workers else "none",
        ),
        (
            f"num-gpus = {group['rayStartParams']['num-gpus']} and nvidia.com/gpu per worker pod",
            "GPUs per worker raylet (CUDA_VISIBLE_DEVICES split)",
            worker_gpus,
        ),
        (
            f"rayStartParams resources {TRAIN_SLOT} = {settings.aws.gpus_per_node}",
            f"{TRAIN_SLOT} per worker raylet (GPUs, or CPU slots on CPU)",
            worker_slots,
        ),
        (
            "vpc.amazonaws.com/efa + FI_PROVIDER=efa, NCCL_NET_PLUGIN=ofi",
            "none: NCCL uses P2P/SHM inside this machine, gloo on CPU",
            "-",
        ),
        (f"head Service (ClusterIP :{DASHBOARD_PORT}) + port-forward", f"dashboard/jobs on {LOOPBACK}", dashboard_url),
    ]


def standin_problems(running: bool, nodes: list[LocalNode]) -> list[str]:
    """Why the raylets cannot stand in for the RayCluster: not running, a head offering GPU work, no train slot."""
    if not running:
        return [NOT_RUNNING]
    head = next((n for n in nodes if n.role == "head"), None)
    workers = [n for n in nodes if n.role == "worker"]
    problems = []
    if head is None or head.gpus or head.train_slots:
        problems.append("the head raylet offers GPUs or train slots; training could land on it")
    if not workers or not all(int(w.train_slots) > 0 for w in workers):
        problems.append(f"a worker raylet has no {TRAIN_SLOT}: training workers cannot be placed there")
    return problems


def raycluster(settings: Settings, *, assume_yes: bool = False) -> KubeRayResult:
    """Notebook 04 on local: the RayCluster rendered and checked, each part mapped to the raylet standing in."""
    obj = render_raycluster(settings)
    info = raylets.status(settings)
    nodes = local_nodes(info)
    problems = check_raycluster(obj, settings) + standin_problems(info.running, nodes)
    return KubeRayResult(
        "local",
        "up",
        not problems,
        message="RayCluster rendered; the local raylets stand in",
        problems=problems,
        mapping=standin_mapping(settings, obj, nodes, info.dashboard_url),
        manifest_yaml=abridged(obj),
    )


def raycluster_status(settings: Settings) -> KubeRayResult:
    """The local raylets as the pods of the RayCluster they stand in for."""
    info = raylets.status(settings)
    pods = [
        dict(
            pod=n.name,
            role=n.role,
            phase="ALIVE" if n.alive else "DEAD",
            ready=n.alive,
            node="localhost",
            instance_type="local",
            zone="-",
        )
        for n in local_nodes(info)
    ]
    message = "local raylets" if info.running else "the local cluster is not running"
    return KubeRayResult("local", "status", info.running, message, pods=pods)


def raycluster_teardown(settings: Settings) -> KubeRayResult:
    return KubeRayResult(
        "local",
        "teardown",
        True,
        "nothing to delete: the local raylets stand in for the RayCluster (notebook 08 stops them with "
        "cluster.step(settings, 'down'))",
    )


__all__ = [
    "NOT_RUNNING",
    "LocalNode",
    "abridged",
    "device_rows",
    "devices",
    "devices_status",
    "devices_teardown",
    "local_nodes",
    "raycluster",
    "raycluster_status",
    "raycluster_teardown",
    "standin_mapping",
    "standin_problems",
]
