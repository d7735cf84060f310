"""The structural checks of a rendered RayCluster or RayJob (run by the tests and before anything is applied).

Nothing here talks to a cluster: :func:`check_raycluster` reads a rendered object and names what would make it
misbehave on EKS, each problem with its fix. The values checked against are :mod:`.ray_pods`'.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from ..core.config import ConfigError, Settings
from ..core.constants import DASHBOARD_PORT, TRAIN_SLOT
from . import rayjob_limits
from .hf_access import check_hf_token
from .kube_objects import EFA_RESOURCE, GPU_RESOURCE, container_of, env_of, quantity, tolerates
from .ray_pods import (
    HEAD_PORTS,
    HF_HOME,
    JOB_ENTRYPOINT,
    NCCL_SOCKET_IFNAME,
    RAY_API,
    SOCKET_IFNAME_EXCLUDE,
    SUBMISSION_MODES,
    head_size,
    resources_param,
    worker_size,
)


def group_pod_spec(group: dict) -> dict:
    """``template.spec`` of a head or worker group."""
    return ((group.get("template") or {}).get("spec")) or {}


def _mount_volume(pod_spec: dict, container: dict, path: str) -> dict | None:
    names = [
        m.get("name")
        for m in container.get("volumeMounts") or []
        if m.get("mountPath", "").rstrip("/") == path.rstrip("/")
    ]
    for volume in pod_spec.get("volumes") or []:
        if volume.get("name") in names:
            return volume
    return None


def _runs_ray_stop(container: dict) -> bool:
    pre_stop = (((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
    return "ray stop" in " ".join(pre_stop)


def _requests_equal_limits(container: dict, where: str, names: tuple[str, ...]) -> list[str]:
    res = container.get("resources") or {}
    req, lim = res.get("requests") or {}, res.get("limits") or {}
    out = []
    for name in names:
        if name not in req or name not in lim:
            out.append(f"{where}: resources.requests and .limits must both set {name}. Fix: requests = limits")
        elif quantity(req[name]) != quantity(lim[name]):
            out.append(
                f"{where}: {name} request {req[name]} != limit {lim[name]}. Fix: requests = limits "
                f"(Guaranteed QoS; no throttling or OOM surprises)"
            )
    return out


def parse_ray_resources(value: str) -> dict[str, Any] | None:
    """What ``ray start --resources=<value>`` receives after the shell KubeRay runs it in."""
    try:
        words = shlex.split(f"--resources={value}")
    except ValueError:
        return None
    if len(words) != 1:
        return None
    try:
        res = json.loads(words[0].split("=", 1)[1])
    except ValueError:
        return None
    return res if isinstance(res, dict) else None


def kuberay_resources_map(value: str) -> dict[str, float] | None:
    """What the KubeRay operator reads from rayStartParams ``resources`` (``getResourcesMap``: surrounding
    quotes, backticks and spaces trimmed, then JSON into a map of numbers), or None where it logs an error."""
    try:
        res = json.loads(value.strip("'\"` "))
    except ValueError:
        return None
    if not isinstance(res, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in res.values()
    ):
        return None
    return res


def socket_ifname_problems(value: str | None) -> list[str]:
    if not value:
        return ["NCCL_SOCKET_IFNAME is not set"]
    if value.startswith("^"):
        excluded = {x.strip() for x in value[1:].split(",")}
        missing = [x for x in SOCKET_IFNAME_EXCLUDE if x not in excluded]
        return [f"NCCL_SOCKET_IFNAME={value!r} does not exclude {', '.join(missing)}"] if missing else []
    chosen = {x.strip().rstrip("=") for x in value.lstrip("=").split(",")}
    bad = [
        x
        for x in chosen
        if any(x == e or (e != "lo" and x.startswith(e)) for e in SOCKET_IFNAME_EXCLUDE) or x.startswith("lo")
    ]
    return [f"NCCL_SOCKET_IFNAME={value!r} selects {', '.join(sorted(bad))}"] if bad else []


def check_raycluster(obj: dict, settings: Settings) -> list[str]:
    """Problems that would make the RayCluster misbehave on EKS ([] = none). Each names the fix."""
    if obj.get("apiVersion") != RAY_API or obj.get("kind") != "RayCluster":
        return [f"not a {RAY_API} RayCluster (apiVersion {obj.get('apiVersion')!r}, kind {obj.get('kind')!r})"]
    return check_cluster_spec(obj.get("spec") or {}, settings, "RayCluster")


def check_rayjob(obj: dict, settings: Settings) -> list[str]:
    if obj.get("apiVersion") != RAY_API or obj.get("kind") != "RayJob":
        return [f"not a {RAY_API} RayJob"]
    spec = obj.get("spec") or {}
    problems = []
    if spec.get("entrypoint") != JOB_ENTRYPOINT:
        problems.append(f"RayJob: entrypoint {spec.get('entrypoint')!r}, expected {JOB_ENTRYPOINT!r}")
    if spec.get("submissionMode") not in SUBMISSION_MODES:
        problems.append(f"RayJob: submissionMode {spec.get('submissionMode')!r}, expected one of {SUBMISSION_MODES}")
    return (
        problems
        + rayjob_limits.limit_problems(spec, settings)
        + check_cluster_spec(spec.get("rayClusterSpec") or {}, settings, "RayJob.rayClusterSpec")
    )


def check_cluster_spec(spec: dict, settings: Settings, what: str) -> list[str]:
    """A RayCluster spec (``what`` names where it sits): cluster fields, the head, every worker group."""
    problems = check_cluster_fields(spec, settings, what)
    head = spec.get("headGroupSpec") or {}
    problems += check_head_scheduling(head, settings) + check_head_container(head, settings)
    groups = spec.get("workerGroupSpecs") or []
    if len(groups) != 1:
        problems.append(f"{what}: expected one worker group (one pod per GPU node), found {len(groups)}")
    for group in groups:
        problems += check_worker_scheduling(group, settings)
        problems += check_worker_devices(group, settings)
        problems += check_worker_runtime(group)
        problems += check_worker_hf_cache(group)
    return problems + check_hf_token(spec, settings) + check_service_accounts(spec, settings, what)


def check_service_accounts(spec: dict, settings: Settings, what: str) -> list[str]:
    """The head and every worker group run as ``kubernetes.service_account`` (it carries the storage role)."""
    want = settings.kubernetes.service_account
    groups = [("head", spec.get("headGroupSpec") or {})]
    groups += [(_group_label(g), g) for g in spec.get("workerGroupSpecs") or []]
    return [
        f"{what} {name}: serviceAccountName {group_pod_spec(g).get('serviceAccountName')!r}, not {want!r}. Fix: "
        f"serviceAccountName: {want} (without it the pods cannot write checkpoints to S3)"
        for name, g in groups
        if group_pod_spec(g).get("serviceAccountName") != want
    ]


def check_worker_hf_cache(group: dict) -> list[str]:
    """HF_HOME points at a mounted cache volume (HF_TOKEN, head and workers: :func:`.hf_access.check_hf_token`)."""
    pod_spec = group_pod_spec(group)
    container = container_of(pod_spec)
    home = env_of(container).get("HF_HOME")
    if not home or _mount_volume(pod_spec, container, home) is None:
        return [
            f"{_group_label(group)}: HF_HOME {home!r} is not a mounted volume. Fix: HF_HOME={HF_HOME} on a cache volume"
        ]
    return []


def check_cluster_fields(spec: dict, settings: Settings, what: str) -> list[str]:
    """The Ray version the image runs, no autoscaler, and Ray's token authentication on."""
    problems = []
    ray_version = settings.versions.ray_version
    if spec.get("rayVersion") != ray_version:
        problems.append(
            f"{what}.spec.rayVersion = {spec.get('rayVersion')!r} but RAY_VERSION is {ray_version!r}. "
            f"Fix: rayVersion must be the image's Ray version"
        )
    if spec.get("enableInTreeAutoscaling"):
        problems.append(
            f"{what}: the autoscaler is on; this tutorial uses a fixed-size group. Fix: enableInTreeAutoscaling: false"
        )
    auth = spec.get("authOptions") or {}
    if auth.get("mode") != "token" or auth.get("enableK8sTokenAuth"):
        problems.append(
            f"{what}.spec.authOptions = {auth or None!r}: any pod that reaches the head could run code on the "
            f"cluster. Fix: authOptions: {{mode: token}} (KubeRay creates the token Secret)"
        )
    return problems


def check_head_scheduling(head: dict, settings: Settings) -> list[str]:
    """The head takes no GPU work, stays behind a ClusterIP Service and runs on the system node."""
    problems = []
    params = head.get("rayStartParams") or {}
    if str(params.get("num-gpus")) != "0" or "num-gpus" not in params:
        problems.append(
            f'head: rayStartParams num-gpus must be "0" (found {params.get("num-gpus")!r}). Fix: the head runs '
            f"on the CPU system node and must never be offered GPU work"
        )
    if (head.get("serviceType") or "ClusterIP") != "ClusterIP":
        problems.append(
            f"head: serviceType {head.get('serviceType')!r} exposes the dashboard. Fix: ClusterIP (use the "
            f"port-forward of kuberay.job_server)"
        )
    if (group_pod_spec(head).get("nodeSelector") or {}).get("role") != "system":
        problems.append("head: nodeSelector role=system is missing. Fix: the head belongs on the system node")
    return problems


def check_head_container(head: dict, settings: Settings) -> list[str]:
    """The head container: image, hidden GPUs, ports, log volume, clean stop, a size the system node fits."""
    pod_spec = group_pod_spec(head)
    container = container_of(pod_spec)
    problems = []
    image = settings.versions.dlc_image
    if container.get("image") != image:
        problems.append(f"head: image {container.get('image')!r} is not DLC_IMAGE {image!r}")
    if env_of(container).get("NVIDIA_VISIBLE_DEVICES") != "void":
        problems.append("head: env NVIDIA_VISIBLE_DEVICES=void is missing. Fix: hide GPUs from the head container")
    ports = {port.get("containerPort") for port in container.get("ports") or []}
    for port in HEAD_PORTS:
        if port not in ports:
            problems.append(
                f"head: container port {port} is not declared. Fix: ports 6379 (GCS), {DASHBOARD_PORT} "
                f"(dashboard/jobs), 10001 (client)"
            )
    volume = _mount_volume(pod_spec, container, "/tmp/ray")
    if not volume or "emptyDir" not in volume:
        problems.append("head: /tmp/ray is not an emptyDir volume. Fix: mount an emptyDir at /tmp/ray (logs)")
    if not _runs_ray_stop(container):
        problems.append("head: lifecycle.preStop does not run `ray stop`. Fix: preStop exec ray stop")
    problems += _requests_equal_limits(container, "head", ("cpu", "memory"))
    return problems + _check_head_size(container, settings)


def _check_head_size(container: dict, settings: Settings) -> list[str]:
    try:
        want = head_size(settings)
    except ConfigError as e:
        return [str(e)]
    req = (container.get("resources") or {}).get("requests") or {}
    if quantity(req.get("cpu")) > want.cpu or quantity(req.get("memory")) > want.memory_gib * 2**30:
        return [
            f"head: requests cpu={req.get('cpu')} memory={req.get('memory')} exceed what a "
            f"{settings.aws.system_node_type} leaves free ({want.cpu} CPU, {want.memory_gib}Gi). Fix: smaller requests"
        ]
    return []


def _group_label(group: dict) -> str:
    return f"worker group {group.get('groupName')!r}"


def check_worker_scheduling(group: dict, settings: Settings) -> list[str]:
    """One pod per GPU node: replicas, GPUs and train slots offered to Ray, image, node selector, tolerations."""
    name, aws = _group_label(group), settings.aws
    problems = []
    count = aws.gpu_node_count
    replicas = (group.get("replicas"), group.get("minReplicas"), group.get("maxReplicas"))
    if replicas != (count, count, count):
        problems.append(
            f"{name}: replicas/minReplicas/maxReplicas = {replicas} but GPU_NODE_COUNT = {count}. "
            f"Fix: all three = {count}"
        )
    params = group.get("rayStartParams") or {}
    if str(params.get("num-gpus")) != str(aws.gpus_per_node):
        problems.append(
            f"{name}: rayStartParams num-gpus = {params.get('num-gpus')!r}, GPUS_PER_NODE = {aws.gpus_per_node}"
        )
    value = str(params.get("resources") or "")
    resources = parse_ray_resources(value) if value else None
    operator_reads = kuberay_resources_map(value) if value else None
    if not resources or resources.get(TRAIN_SLOT) != aws.gpus_per_node or operator_reads != resources:
        problems.append(
            f"{name}: rayStartParams resources needs {TRAIN_SLOT} = {aws.gpus_per_node} as JSON both the KubeRay "
            f"operator and the ray start shell read (found {value!r}). Fix: {resources_param(aws.gpus_per_node)}"
        )
    pod_spec = group_pod_spec(group)
    image = container_of(pod_spec).get("image")
    if image != settings.versions.dlc_image:
        problems.append(
            f"{name}: image {image!r} is not DLC_IMAGE {settings.versions.dlc_image!r} (head and workers run "
            f"the same tag)"
        )
    if (pod_spec.get("nodeSelector") or {}).get("role") != "gpu-worker":
        problems.append(f"{name}: nodeSelector role=gpu-worker is missing")
    for key in ("nvidia.com/gpu", "aws.amazon.com/efa"):
        if not tolerates(pod_spec, key):
            problems.append(
                f"{name}: no toleration for the {key} taint of the GPU nodes. Fix: "
                f"{{key: {key}, operator: Exists, effect: NoSchedule}}"
            )
    return problems


def check_worker_devices(group: dict, settings: Settings) -> list[str]:
    """Every GPU of the node and at least one EFA device claimed, requests = limits, a size the node fits."""
    name, aws = _group_label(group), settings.aws
    container = container_of(group_pod_spec(group))
    resources = container.get("resources") or {}
    req, lim = resources.get("requests") or {}, resources.get("limits") or {}
    problems = []
    for resource, want in ((GPU_RESOURCE, aws.gpus_per_node), (EFA_RESOURCE, None)):
        if resource not in req or resource not in lim:
            problems.append(
                f"{name}: {resource} must be requested (requests and limits). Fix: "
                + (
                    "the pod must claim every GPU of the node"
                    if want
                    else "without an EFA request the pod gets no EFA device and NCCL falls back to TCP sockets"
                )
            )
            continue
        got = int(quantity(req[resource]))
        if want is not None and got != want:
            problems.append(f"{name}: {resource} = {got}, GPUS_PER_NODE = {want}")
        if want is None and got < 1:
            problems.append(f"{name}: {resource} = {got}. Fix: at least 1")
    problems += _requests_equal_limits(container, name, ("cpu", "memory", GPU_RESOURCE, EFA_RESOURCE))
    size = worker_size(settings)
    if quantity(req.get("cpu")) > size.cpu or quantity(req.get("memory")) > size.memory_gib * 2**30:
        problems.append(
            f"{name}: requests cpu={req.get('cpu')} memory={req.get('memory')} exceed what a "
            f"{aws.gpu_node_type} leaves free ({size.cpu} CPU, {size.memory_gib}Gi)"
        )
    return problems


def check_worker_runtime(group: dict) -> list[str]:
    """A memory-backed /dev/shm, the EFA/NCCL environment, and a clean stop."""
    name = _group_label(group)
    pod_spec = group_pod_spec(group)
    container = container_of(pod_spec)
    problems = []
    shm = _mount_volume(pod_spec, container, "/dev/shm")
    if not shm or (shm.get("emptyDir") or {}).get("medium") != "Memory":
        problems.append(
            f"{name}: /dev/shm is not a memory-backed emptyDir. Fix: volume emptyDir {{medium: Memory}} "
            f"mounted at /dev/shm (NCCL and the object store need more than the 64 MiB default)"
        )
    env = env_of(container)
    if env.get("FI_PROVIDER") != "efa":
        problems.append(f"{name}: FI_PROVIDER = {env.get('FI_PROVIDER')!r}. Fix: FI_PROVIDER=efa")
    if env.get("NCCL_NET_PLUGIN") != "ofi":
        problems.append(f"{name}: NCCL_NET_PLUGIN = {env.get('NCCL_NET_PLUGIN')!r}. Fix: NCCL_NET_PLUGIN=ofi")
    for msg in socket_ifname_problems(env.get("NCCL_SOCKET_IFNAME")):
        problems.append(f"{name}: {msg}. Fix: NCCL_SOCKET_IFNAME={NCCL_SOCKET_IFNAME}")
    if not env.get("NCCL_DEBUG"):
        problems.append(f"{name}: NCCL_DEBUG is not set. Fix: NCCL_DEBUG=INFO (the transport audit reads its log)")
    if not _runs_ray_stop(container):
        problems.append(f"{name}: lifecycle.preStop does not run `ray stop`")
    return problems


__all__ = [
    "check_cluster_fields",
    "check_cluster_spec",
    "check_head_container",
    "check_head_scheduling",
    "check_raycluster",
    "check_rayjob",
    "check_service_accounts",
    "check_worker_devices",
    "check_worker_hf_cache",
    "check_worker_runtime",
    "check_worker_scheduling",
    "group_pod_spec",
    "kuberay_resources_map",
    "parse_ray_resources",
    "socket_ifname_problems",
]
