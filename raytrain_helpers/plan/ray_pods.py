"""What each Ray pod of the RayCluster is made of: its size on the node (requests = limits, computed from the
instance types: :class:`NodeShape`), the GPU workers' environment, their train slots and Hugging Face cache; and
the fixed names the RayCluster and the RayJob carry (API, entrypoint, ports).

:mod:`.raycluster` renders the objects from these values; :mod:`.raycluster_checks` checks a rendered object
against them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from ..core.config import INSTANCE_TYPES, ConfigError, Settings
from ..core.constants import DASHBOARD_PORT, ENTRYPOINT_MODULE, TRAIN_SLOT
from .memory import count_params

RAY_API = "ray.io/v1"
#: Interfaces NCCL must not use for its bootstrap/socket traffic: loopback, Docker's bridge and the EKS Pod
#: Identity agent's link-local interface. The agent creates ``pod-id-link0`` (169.254.170.23) on the node, in the
#: host network (aws/eks-pod-identity-agent, configuration: AgentLinkName; EKS user guide, pod-id-agent-setup,
#: checked 2026-12-04): a pod with its own network namespace does not see it, a host-network pod would.
SOCKET_IFNAME_EXCLUDE = ("lo", "docker0", "pod-id-link0")
NCCL_SOCKET_IFNAME = "^" + ",".join(SOCKET_IFNAME_EXCLUDE)
#: The network NCCL must use between the GPU nodes: the aws-ofi-nccl plugin, by the name it registers (``.name =
#: "Libfabric"`` in aws/aws-ofi-nccl v1.20.0, src/nccl_ofi_interface_nvidia.cpp; the DLC ships 1.20.0). NCCL's
#: ``NCCL_NET`` "forces NCCL to use a specific network" and stops its automatic fallback to the internal IB or
#: Socket transports (NCCL user guide, Environment Variables, NCCL_NET): a pod whose plugin or EFA device is missing
#: then fails at NCCL's initialisation instead of training over TCP. 07's socket baseline sets ``NCCL_NET=Socket``
#: in the job's env_vars, which override the pod's.
NCCL_NET_EFA = "Libfabric"
SUBMISSION_MODES = ("K8sJobMode", "HTTPMode")
JOB_ENTRYPOINT = f"python -m {ENTRYPOINT_MODULE} --config job_config.json"
#: The head container's ports: GCS, dashboard/jobs, client.
HEAD_PORTS = (6379, DASHBOARD_PORT, 10001)
#: Where the workers' Hugging Face cache volume is mounted (``HF_HOME``), and its smallest size in GiB.
HF_HOME = "/mnt/hf-cache"
HF_CACHE_MIN_GIB = 10
#: The node-disk room (``ephemeral-storage``, requests = limits) of a Ray head: its logs under /tmp/ray, the job
#: drivers' runtime_env and the container's writable layer. The kubelet evicts a pod that passes its limit, so one
#: pod cannot fill the system node that also runs the KubeRay operator.
HEAD_EPHEMERAL_GIB = 20
#: A worker's room beside its Hugging Face cache: Ray's logs and spilled objects, the runtime_env, the writable layer.
WORKER_SCRATCH_GIB = 20
#: Bytes per parameter of the training state a worker stages in /tmp before uploading a checkpoint (fp32 weights,
#: Adam's two moments, bf16 weights: 4 + 8 + 2, rounded up), split over the workers; plus one bf16 export (2).
CHECKPOINT_BYTES_PER_PARAM = 16
EXPORT_BYTES_PER_PARAM = 2


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
# The workers' environment, train slots and model cache
# ============================================================================================


def worker_env(settings: Settings) -> list[tuple[str, str]]:
    """The GPU workers' environment: EFA through the OFI plugin and no other network (``NCCL_NET``), NCCL's
    interface filter, debug level, then ``settings.nccl.env`` (which may override any of them)."""
    env = {
        "FI_PROVIDER": "efa",
        "NCCL_NET_PLUGIN": "ofi",
        "NCCL_NET": NCCL_NET_EFA,
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


def worker_ephemeral_gib(settings: Settings) -> int:
    """A GPU worker's ``ephemeral-storage`` (requests = limits) in GiB: its Hugging Face cache volume, its share of
    a staged checkpoint, one exported model and :data:`WORKER_SCRATCH_GIB`."""
    params = count_params(settings.model_config_dict())["total"]
    staged = params * (CHECKPOINT_BYTES_PER_PARAM / max(1, settings.aws.gpu_node_count) + EXPORT_BYTES_PER_PARAM)
    return hf_cache_gib(settings) + math.ceil(staged / 2**30) + WORKER_SCRATCH_GIB


def resources_param(slots: int) -> str:
    """rayStartParams ``resources`` as KubeRay itself writes it: compact JSON in single quotes, ``'{"k":1}'``.

    The operator parses the value (``getResourcesMap`` trims quotes and unmarshals JSON, to add accelerator
    resources) and pastes it into the ``ray start`` shell command, which removes the single quotes
    (ray-project/kuberay v1.7.0, ray-operator/controllers/ray/common/pod.go: ``getResourcesMap``,
    ``convertParamMap``, and ``fmt.Sprintf("'%s'", ...)`` where it writes the parameter)."""
    return "'" + json.dumps({TRAIN_SLOT: slots}, separators=(",", ":")) + "'"


__all__ = [
    "GPU_NODE_RESERVE_CPU_M",
    "GPU_NODE_RESERVE_MEM_GIB",
    "HEAD_PORTS",
    "HEAD_EPHEMERAL_GIB",
    "HF_CACHE_MIN_GIB",
    "HF_HOME",
    "JOB_ENTRYPOINT",
    "MEMORY_VISIBLE",
    "NCCL_SOCKET_IFNAME",
    "OPERATOR_REQUESTS",
    "RAY_API",
    "SHM_FRACTION",
    "SOCKET_IFNAME_EXCLUDE",
    "SUBMISSION_MODES",
    "SYSTEM_NODE_RESERVE_CPU_M",
    "SYSTEM_NODE_RESERVE_MEM_GIB",
    "NodeShape",
    "PodSize",
    "gpu_node_shape",
    "head_size",
    "hf_cache_gib",
    "max_pods",
    "resources_param",
    "system_node_shape",
    "worker_env",
    "NCCL_NET_EFA",
    "worker_ephemeral_gib",
    "worker_size",
]
