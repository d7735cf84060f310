"""The RayCluster, the RayJob and the KubeRay operator as the settings ask for them, and their structural checks.

Pod sizes (requests = limits) are computed from the instance types (:mod:`.ray_pods`: :class:`NodeShape`); the
objects are rendered here from those values. Nothing here talks to a cluster: :func:`check_raycluster`
(:mod:`.raycluster_checks`) reads a rendered object and names what would make it misbehave on EKS. Every name of
the two modules is importable from here too.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..core.config import INSTANCE_TYPES, Settings
from ..core.constants import DASHBOARD_PORT
from . import rayjob_limits
from .ray_pods import (
    GPU_NODE_RESERVE_CPU_M,
    GPU_NODE_RESERVE_MEM_GIB,
    HEAD_EPHEMERAL_GIB,
    HEAD_PORTS,
    HF_CACHE_MIN_GIB,
    HF_HOME,
    JOB_ENTRYPOINT,
    MEMORY_VISIBLE,
    NCCL_SOCKET_IFNAME,
    OPERATOR_REQUESTS,
    RAY_API,
    SHM_FRACTION,
    SOCKET_IFNAME_EXCLUDE,
    SUBMISSION_MODES,
    SYSTEM_NODE_RESERVE_CPU_M,
    SYSTEM_NODE_RESERVE_MEM_GIB,
    NodeShape,
    PodSize,
    gpu_node_shape,
    head_size,
    hf_cache_gib,
    max_pods,
    resources_param,
    system_node_shape,
    worker_env,
    worker_ephemeral_gib,
    worker_size,
)
from .raycluster_checks import (
    check_cluster_fields,
    check_cluster_spec,
    check_head_container,
    check_head_scheduling,
    check_raycluster,
    check_rayjob,
    check_service_accounts,
    check_worker_devices,
    check_worker_hf_cache,
    check_worker_runtime,
    check_worker_scheduling,
    group_pod_spec,
    kuberay_resources_map,
    parse_ray_resources,
    socket_ifname_problems,
)
from .render import render_objects

#: The KubeRay operator: ray-project/kuberay's Helm chart (helm-chart/kuberay-operator, published to this repository),
#: version = KUBERAY_VERSION; the chart brings the operator's RBAC and its CRDs (crds/, created on install).
OPERATOR_NAMESPACE = "kuberay-system"
#: The key of the token in KubeRay's auth Secret (utils.RAY_AUTH_TOKEN_SECRET_KEY, kuberay v1.7.0 constant.go).
AUTH_TOKEN_KEY = "auth_token"
#: The NetworkPolicies of :func:`render_network_policies`, by name.
NETWORK_POLICIES = ("raytrain-default-deny-ingress", "raytrain-ray-same-namespace")
OPERATOR_RELEASE = "kuberay-operator"
OPERATOR_CHART = "kuberay-operator"
KUBERAY_HELM_REPO = "https://ray-project.github.io/kuberay-helm/"


# ============================================================================================
# Rendering
# ============================================================================================


def raycluster_values(settings: Settings) -> dict[str, Any]:
    """The computed values the RayCluster template uses (as ``rc``)."""
    head, worker = head_size(settings), worker_size(settings)
    it = INSTANCE_TYPES[settings.aws.gpu_node_type]
    return dict(
        head_cpu=str(head.cpu),
        head_memory=f"{head.memory_gib}Gi",
        worker_cpu=str(worker.cpu),
        worker_memory=f"{worker.memory_gib}Gi",
        shm_size=f"{worker.shm_gib}Gi",
        efa_per_node=int(it["efa"]),
        node_vcpus=it["vcpus"],
        node_mem_gib=it["mem_gib"],
        group_name=settings.aws.gpu_nodegroup_name,
        worker_env=worker_env(settings),
        resources_param=resources_param(settings.aws.gpus_per_node),
        hf_home=HF_HOME,
        hf_cache_size=f"{hf_cache_gib(settings)}Gi",
        head_ephemeral=f"{HEAD_EPHEMERAL_GIB}Gi",
        worker_ephemeral=f"{worker_ephemeral_gib(settings)}Gi",
        auth_secret=auth_secret_name(settings.kubernetes.ray_cluster_name),
    )


def auth_secret_name(cluster_name: str) -> str:
    """The Secret KubeRay creates for a RayCluster with ``authOptions.mode: token`` (key :data:`AUTH_TOKEN_KEY`):
    the cluster's name as ``utils.CheckName`` shortens it (the last 50 characters; a leading digit or punctuation
    replaced by ``r``), ray-project/kuberay v1.7.0 ray-operator/controllers/ray/raycluster_controller.go
    ``reconcileAuthSecret`` and utils/util.go ``CheckName``."""
    name = cluster_name[-50:]
    if name[:1].isdigit() or (name[:1] and not name[:1].isalnum()):
        name = "r" + name[1:]
    return name


def render_network_policies(settings: Settings) -> list[dict[str, Any]]:
    """The namespace's NetworkPolicies: no ingress to any pod, except to the Ray pods from the namespace's own
    pods and, on the dashboard port, from the KubeRay operator's namespace (``manifests/networkpolicy.yaml.j2``)."""
    return render_objects(
        "networkpolicy.yaml.j2",
        settings,
        np=dict(operator_namespace=OPERATOR_NAMESPACE, dashboard_port=DASHBOARD_PORT, policies=NETWORK_POLICIES),
    )


def rayjob_values(
    settings: Settings, *, working_dir: str | None = None, submission_mode: str = "K8sJobMode", ttl_s: int = 600, **lim
) -> dict[str, Any]:
    """The computed values the RayJob template uses (as ``rj``); ``lim``: :func:`.rayjob_limits.limits`."""
    if submission_mode not in SUBMISSION_MODES:
        raise ValueError(f"submission_mode must be one of {', '.join(SUBMISSION_MODES)}")
    runtime_env: dict[str, Any] = {}
    if working_dir:
        runtime_env["working_dir"] = working_dir
    if settings.train.extra_pip:
        runtime_env["pip"] = list(settings.train.extra_pip)
    return dict(
        entrypoint=JOB_ENTRYPOINT,
        submission_mode=submission_mode,
        ttl_s=int(ttl_s),
        **rayjob_limits.limits(settings, **lim),
        runtime_env_yaml=yaml.safe_dump(runtime_env, sort_keys=False).strip() if runtime_env else "",
    )


def render_raycluster(settings: Settings) -> dict[str, Any]:
    (obj,) = render_objects("raycluster.yaml.j2", settings, rc=raycluster_values(settings))
    return obj


def render_rayjob(settings: Settings, **options: Any) -> dict[str, Any]:
    """The RayJob (the declarative alternative to submitting to a RayCluster); options: :func:`rayjob_values`."""
    (obj,) = render_objects(
        "rayjob.yaml.j2", settings, rc=raycluster_values(settings), rj=rayjob_values(settings, **options)
    )
    return obj


def operator_helm_values(settings: Settings) -> dict[str, Any]:
    """The kuberay-operator chart's values: the operator runs on the system node (role=system)."""
    return {"nodeSelector": {"role": "system"}}


def render_namespace(settings: Settings) -> dict[str, Any]:
    (obj,) = render_objects("namespace.yaml.j2", settings, ns_name=settings.kubernetes.namespace)
    return obj


# ============================================================================================
# What differs between the wanted and the live spec
# ============================================================================================


def spec_diff(want: Any, have: Any, path: str = "spec") -> list[str]:
    """Fields of ``want`` that ``have`` lacks or holds differently (server defaults in ``have`` are ignored)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [path]
        out = []
        for key, value in want.items():
            out += spec_diff(value, have.get(key), f"{path}.{key}")
        return out
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return [path]
        out = []
        for i, (wanted, held) in enumerate(zip(want, have, strict=True)):
            out += spec_diff(wanted, held, f"{path}[{i}]")
        return out
    if want != have and not (isinstance(want, (int, float, str)) and str(want) == str(have)):
        return [path]
    return []


__all__ = [
    "AUTH_TOKEN_KEY",
    "NETWORK_POLICIES",
    "auth_secret_name",
    "render_network_policies",
    "GPU_NODE_RESERVE_CPU_M",
    "GPU_NODE_RESERVE_MEM_GIB",
    "HEAD_PORTS",
    "HF_CACHE_MIN_GIB",
    "HF_HOME",
    "JOB_ENTRYPOINT",
    "KUBERAY_HELM_REPO",
    "MEMORY_VISIBLE",
    "NCCL_SOCKET_IFNAME",
    "OPERATOR_CHART",
    "OPERATOR_NAMESPACE",
    "OPERATOR_RELEASE",
    "OPERATOR_REQUESTS",
    "RAY_API",
    "SHM_FRACTION",
    "SOCKET_IFNAME_EXCLUDE",
    "SUBMISSION_MODES",
    "SYSTEM_NODE_RESERVE_CPU_M",
    "SYSTEM_NODE_RESERVE_MEM_GIB",
    "NodeShape",
    "PodSize",
    "check_cluster_fields",
    "check_cluster_spec",
    "check_head_container",
    "check_head_scheduling",
    "check_raycluster",
    "check_rayjob",
    "check_service_accounts",
    "check_worker_hf_cache",
    "check_worker_devices",
    "check_worker_runtime",
    "check_worker_scheduling",
    "gpu_node_shape",
    "group_pod_spec",
    "head_size",
    "hf_cache_gib",
    "max_pods",
    "kuberay_resources_map",
    "operator_helm_values",
    "parse_ray_resources",
    "raycluster_values",
    "rayjob_values",
    "render_namespace",
    "render_raycluster",
    "render_rayjob",
    "resources_param",
    "socket_ifname_problems",
    "spec_diff",
    "system_node_shape",
    "worker_env",
    "worker_size",
]
