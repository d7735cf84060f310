"""The RayCluster, the RayJob and the KubeRay operator as the settings ask for them, and their structural checks.

Pod sizes (requests = limits) are computed from the instance types: see :class:`NodeShape`. Nothing here talks
to a cluster: :func:`check_raycluster` reads a rendered object and names what would make it misbehave on EKS.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from ..core.config import INSTANCE_TYPES, ConfigError, Settings
from ..core.constants import DASHBOARD_PORT, ENTRYPOINT_MODULE, TRAIN_SLOT
from . import rayjob_limits
from .hf_access import check_hf_token
from .kube_objects import EFA_RESOURCE, GPU_RESOURCE, container_of, env_of, quantity, tolerates
from .memory import count_params
from .render import render_objects

RAY_API = "ray.io/v1"
OPERATOR_NAMESPACE = "kuberay-system"
OPERATOR_RELEASE = "kuberay-operator"
KUBERAY_HELM_REPO = "https://ray-project.github.io/kuberay-helm/"
OPERATOR_IMAGE = "quay.io/kuberay/operator:v{version}"
#: Interfaces NCCL must not use for its bootstrap/socket traffic: loopback, Docker's bridge and the EKS Pod
#: Identity agent's link-local interface. The agent creates ``pod-id-link0`` (169.254.170.23) on the node, in the
#: host network (aws/eks-pod-identity-agent, configuration: AgentLinkName; EKS user guide, pod-id-agent-setup,
#: checked 2026-12-04): a pod with its own network namespace does not see it, a host-network pod would.
SOCKET_IFNAME_EXCLUDE = ("lo", "docker0", "pod-id-link0")
NCCL_SOCKET_IFNAME = "^" + ",".join(SOCKET_IFNAME_EXCLUDE)
SUBMISSION_MODES = ("K8sJobMode", "HTTPMode")
JOB_ENTRYPOINT = f"python -m {ENTRYPOINT_MODULE} --config job_config.json"
#: The head container's ports: GCS, dashboard/jobs, client.
HEAD_PORTS = (6379, DASHBOARD_PORT, 10001)
#: Where the workers' Hugging Face cache volume is mounted (``HF_HOME``), and its smallest size in GiB.
HF_HOME = "/mnt/hf-cache"
HF_CACHE_MIN_GIB = 10


# ============================================================================================
# Pod sizes: requests = limits that fit the nodes
# ============================================================================================
# An EKS node's allocatable is its capacity minus the kubelet's reservations (the EKS AMI's formulas):
#   CPU: 6 % of the first core, 1 % of the second, 0.5 % of cores 3-4, 0.25 % of the rest;
#   memory: 255 MiB + 11 MiB per schedulable pod, plus the 100 MiB hard-eviction threshold.
# The kernel reports a few percent less memory than the nominal size (MEMORY_VISIBLE). What the node's
# other pods request is then left free. The aws step re-checks against the live allocatable before applying.

MEMORY_VISIBLE = 0.90  # conservative: EC2 MemTotal is ~93-97 % of the nominal GiB
SYSTEM_NODE_RESERVE_CPU_M = 1000  # kube-system (CoreDNS x2, kube-proxy, aws-node, CSI...) + the operator
SYSTEM_NODE_RESERVE_MEM_GIB = 3.0  # the same pods' memory (the operator's 512Mi included) plus headroom
GPU_NODE_RESERVE_CPU_M = 1000  # per-node daemons on a GPU node (aws-node, kube-proxy, plugins, CSI)
GPU_NODE_RESERVE_MEM_GIB = 2.0
SHM_FRACTION = 0.4  # /dev/shm: Ray's object store (30 % by default) + NCCL's buffers
OPERATOR_REQUESTS = (100, 512 / 1024)  # the operator's cpu (m) / memory (GiB), chart default

_FAMILY_GIB_PER_VCPU = {"m": 4, "c": 2, "r": 8, "t": 4}
_SIZE_VCPUS = {"medium": 1, "large": 2, "xlarge": 4}


@dataclass(frozen=True)
class NodeShape:
    instance_type: str
    vcpus: int
    mem_gib: float
    max_pods: int

    @property
    def reserved_cpu_m(self) -> float:
        v = self.vcpus
        return 60 + (10 if v >= 2 else 0) + 5 * min(max(v - 2, 0), 2) + 2.5 * max(v - 4, 0)

    @property
    def reserved_mem_mib(self) -> float:
        return 255 + 11 * self.max_pods + 100

    @property
    def allocatable_cpu_m(self) -> float:
        return self.vcpus * 1000 - self.reserved_cpu_m

    @property
    def allocatable_mem_gib(self) -> float:
        return self.mem_gib * MEMORY_VISIBLE - self.reserved_mem_mib / 1024


def max_pods(vcpus: int) -> int:
    """Pods a node of this size schedules: VPC CNI ENI limits for small sizes; nodeadm caps the rest."""
    if vcpus <= 2:
        return 29
    if vcpus <= 8:
        return 58
    return 110 if vcpus < 30 else 250


def system_node_shape(instance_type: str) -> NodeShape:
    """vCPUs and memory of a general-purpose (m/c/r/t) instance type, read from its name."""
    m = re.match(r"^([a-z]+)(\d+)([a-z-]*)\.(\d*)(medium|large|xlarge)$", instance_type or "")
    if not m or m.group(1) not in _FAMILY_GIB_PER_VCPU or (m.group(4) and m.group(5) != "xlarge"):
        raise ConfigError(
            f"aws.system_node_type (SYSTEM_NODE_TYPE) = {instance_type!r}: cannot size the Ray head for it. "
            f"Fix: a general-purpose m/c/r/t type such as m7i.xlarge (4 vCPU, 16 GiB) or m7i.2xlarge"
        )
    vcpus = _SIZE_VCPUS[m.group(5)] * int(m.group(4) or 1)
    return NodeShape(instance_type, vcpus, vcpus * _FAMILY_GIB_PER_VCPU[m.group(1)], max_pods(vcpus))


def gpu_node_shape(instance_type: str) -> NodeShape:
    it = INSTANCE_TYPES[instance_type]
    return NodeShape(instance_type, it["vcpus"], it["mem_gib"], max_pods(it["vcpus"]))


@dataclass(frozen=True)
class PodSize:
    cpu: int  # whole cores
    memory_gib: int
    shm_gib: int = 0


def head_size(settings: Settings) -> PodSize:
    node = system_node_shape(settings.aws.system_node_type)
    cpu = math.floor((node.allocatable_cpu_m - SYSTEM_NODE_RESERVE_CPU_M) / 1000)
    mem = math.floor(node.allocatable_mem_gib - SYSTEM_NODE_RESERVE_MEM_GIB)
    if cpu < 1 or mem < 4:
        raise ConfigError(
            f"aws.system_node_type (SYSTEM_NODE_TYPE) = {settings.aws.system_node_type!r} is too small for "
            f"kube-system, the KubeRay operator and a Ray head (the head would get {cpu} CPU / {mem} GiB, it "
            f"needs at least 1 CPU / 4 GiB). Fix: m7i.xlarge or larger"
        )
    return PodSize(cpu, mem)


def worker_size(settings: Settings) -> PodSize:
    node = gpu_node_shape(settings.aws.gpu_node_type)
    cpu = math.floor((node.allocatable_cpu_m - GPU_NODE_RESERVE_CPU_M) / 1000)
    mem = math.floor(node.allocatable_mem_gib - GPU_NODE_RESERVE_MEM_GIB)
    return PodSize(cpu, mem, max(1, math.floor(mem * SHM_FRACTION)))


# ============================================================================================
# Rendering
# ============================================================================================


def worker_env(settings: Settings) -> list[tuple[str, str]]:
    """The GPU workers' environment: EFA through the OFI plugin, NCCL's interface filter, debug level,
    then ``settings.nccl.env`` (which may override any of them)."""
    env = {
        "FI_PROVIDER": "efa",
        "NCCL_NET_PLUGIN": "ofi",
        "NCCL_SOCKET_IFNAME": NCCL_SOCKET_IFNAME,
        "NCCL_DEBUG": settings.nccl.debug,
    }
    for k, v in settings.nccl.env.items():
        env[str(k)] = str(v)
    return list(env.items())


def hf_cache_gib(settings: Settings) -> int:
    """The workers' Hugging Face cache volume in GiB: ``kubernetes.hf_cache_gib``, or twice the model's bf16
    weights (the download and its conversion), at least :data:`HF_CACHE_MIN_GIB`."""
    if settings.kubernetes.hf_cache_gib:
        return settings.kubernetes.hf_cache_gib
    weights_gib = count_params(settings.model_config_dict())["total"] * 2 / 2**30
    return max(HF_CACHE_MIN_GIB, math.ceil(2 * weights_gib))


def resources_param(slots: int) -> str:
    """rayStartParams ``resources``: JSON quoted for the shell KubeRay runs ``ray start`` in."""
    return '"' + json.dumps({TRAIN_SLOT: slots}).replace('"', '\\"') + '"'


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


def operator_values(settings: Settings) -> dict[str, Any]:
    return dict(namespace=OPERATOR_NAMESPACE, image=OPERATOR_IMAGE.format(version=settings.versions.kuberay_version))


def render_operator(settings: Settings) -> list[dict[str, Any]]:
    return render_objects("kuberay-operator.yaml.j2", settings, op=operator_values(settings))


def render_namespace(settings: Settings) -> dict[str, Any]:
    (obj,) = render_objects("namespace.yaml.j2", settings, ns_name=settings.kubernetes.namespace)
    return obj


# ============================================================================================
# Structural checks (run by the tests and before anything is applied)
# ============================================================================================


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
    """The Ray version the image runs, and no autoscaler."""
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
    resources = parse_ray_resources(params.get("resources", "")) if params.get("resources") else None
    if not resources or resources.get(TRAIN_SLOT) != aws.gpus_per_node:
        problems.append(
            f"{name}: rayStartParams resources must give {TRAIN_SLOT} = {aws.gpus_per_node} as shell-quoted "
            f"JSON (found {params.get('resources')!r}). Fix: {resources_param(aws.gpus_per_node)}"
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
    "GPU_NODE_RESERVE_CPU_M",
    "GPU_NODE_RESERVE_MEM_GIB",
    "HEAD_PORTS",
    "HF_CACHE_MIN_GIB",
    "HF_HOME",
    "JOB_ENTRYPOINT",
    "KUBERAY_HELM_REPO",
    "MEMORY_VISIBLE",
    "NCCL_SOCKET_IFNAME",
    "OPERATOR_IMAGE",
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
    "operator_values",
    "parse_ray_resources",
    "raycluster_values",
    "rayjob_values",
    "render_namespace",
    "render_operator",
    "render_raycluster",
    "render_rayjob",
    "resources_param",
    "socket_ifname_problems",
    "spec_diff",
    "system_node_shape",
    "worker_env",
    "worker_size",
]
