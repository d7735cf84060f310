"""Step 04: KubeRay and the RayCluster (and the job server that notebook 05 submits to).

``aws``: install the KubeRay operator (Helm chart ``kuberay-operator`` pinned to KUBERAY_VERSION when
``helm`` is on PATH, else the rendered manifests plus the release's CRDs) on the system node, create the
namespace, check the rendered RayCluster (:func:`check_raycluster`) and the nodes' allocatable, apply it
with server-side apply, and wait for the head to be Ready and every worker Running.

``local``: the RayCluster is rendered and shown next to the local stand-in of each of its parts (head
raylet with no CPUs/GPUs, worker raylets with GPUs and ``train_slot``), from ``targets.local.status``.

Pod sizes (requests = limits) are computed from the instance types: see :class:`NodeShape`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml

from . import k8s
from .config import INSTANCE_TYPES, ConfigError, Settings

TRAIN_SLOT = "train_slot"
OPERATOR_NAMESPACE = "kuberay-system"
OPERATOR_RELEASE = "kuberay-operator"
KUBERAY_HELM_REPO = "https://ray-project.github.io/kuberay-helm/"
OPERATOR_IMAGE = "quay.io/kuberay/operator:v{version}"
RAY_API = "ray.io/v1"
#: Interfaces NCCL must not use for its bootstrap/socket traffic: loopback, Docker's bridge and the
#: EKS Pod Identity link-local interface (NCCL picks it otherwise and the ranks cannot reach each other).
SOCKET_IFNAME_EXCLUDE = ("lo", "docker0", "pod-id-link0")
NCCL_SOCKET_IFNAME = "^" + ",".join(SOCKET_IFNAME_EXCLUDE)
SUBMISSION_MODES = ("K8sJobMode", "HTTPMode")
JOB_ENTRYPOINT = "python -m raytrain_helpers.entrypoint --config job_config.json"
DASHBOARD_PORT = 8265


# ============================================================================================
# Pod sizes: requests = limits that fit the nodes
# ============================================================================================
# An EKS node's allocatable is its capacity minus the kubelet's reservations (the EKS AMI's formulas):
#   CPU: 6 % of the first core, 1 % of the second, 0.5 % of cores 3-4, 0.25 % of the rest;
#   memory: 255 MiB + 11 MiB per schedulable pod, plus the 100 MiB hard-eviction threshold.
# The kernel reports a few percent less memory than the nominal size (MEMORY_VISIBLE). What the node's
# other pods request is then left free. step() re-checks against the live allocatable before applying.

MEMORY_VISIBLE = 0.90              # conservative: EC2 MemTotal is ~93-97 % of the nominal GiB
SYSTEM_NODE_RESERVE_CPU_M = 1000   # kube-system (CoreDNS x2, kube-proxy, aws-node, CSI...) + the operator
SYSTEM_NODE_RESERVE_MEM_GIB = 3.0  # the same pods' memory (the operator's 512Mi included) plus headroom
GPU_NODE_RESERVE_CPU_M = 1000      # per-node daemons on a GPU node (aws-node, kube-proxy, plugins, CSI)
GPU_NODE_RESERVE_MEM_GIB = 2.0
SHM_FRACTION = 0.4                 # /dev/shm: Ray's object store (30 % by default) + NCCL's buffers
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


def _max_pods(vcpus: int) -> int:
    # VPC CNI ENI limits for small sizes; nodeadm caps the rest (110 under 30 vCPUs, else 250)
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
            f"Fix: a general-purpose m/c/r/t type such as m7i.xlarge (4 vCPU, 16 GiB) or m7i.2xlarge")
    vcpus = _SIZE_VCPUS[m.group(5)] * int(m.group(4) or 1)
    return NodeShape(instance_type, vcpus, vcpus * _FAMILY_GIB_PER_VCPU[m.group(1)], _max_pods(vcpus))


def gpu_node_shape(instance_type: str) -> NodeShape:
    it = INSTANCE_TYPES[instance_type]
    return NodeShape(instance_type, it["vcpus"], it["mem_gib"], _max_pods(it["vcpus"]))


@dataclass(frozen=True)
class PodSize:
    cpu: int          # whole cores
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
            f"needs at least 1 CPU / 4 GiB). Fix: m7i.xlarge or larger")
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


def resources_param(slots: int) -> str:
    """rayStartParams ``resources``: JSON quoted for the shell KubeRay runs ``ray start`` in."""
    return '"' + json.dumps({TRAIN_SLOT: slots}).replace('"', '\\"') + '"'


def raycluster_values(settings: Settings) -> dict[str, Any]:
    """The computed values the RayCluster template uses (as ``rc``)."""
    head, worker = head_size(settings), worker_size(settings)
    it = INSTANCE_TYPES[settings.aws.gpu_node_type]
    return dict(
        head_cpu=str(head.cpu), head_memory=f"{head.memory_gib}Gi",
        worker_cpu=str(worker.cpu), worker_memory=f"{worker.memory_gib}Gi", shm_size=f"{worker.shm_gib}Gi",
        efa_per_node=int(it["efa"]), node_vcpus=it["vcpus"], node_mem_gib=it["mem_gib"],
        group_name=settings.aws.gpu_nodegroup_name, worker_env=worker_env(settings),
        resources_param=resources_param(settings.aws.gpus_per_node),
    )


def rayjob_values(settings: Settings, *, working_dir: str | None = None,
                  submission_mode: str = "K8sJobMode", ttl_s: int = 600) -> dict[str, Any]:
    if submission_mode not in SUBMISSION_MODES:
        raise ValueError(f"submission_mode must be one of {', '.join(SUBMISSION_MODES)}")
    renv: dict[str, Any] = {}
    if working_dir:
        renv["working_dir"] = working_dir
    if settings.train.extra_pip:
        renv["pip"] = list(settings.train.extra_pip)
    return dict(entrypoint=JOB_ENTRYPOINT, submission_mode=submission_mode, ttl_s=int(ttl_s),
                runtime_env_yaml=yaml.safe_dump(renv, sort_keys=False).strip() if renv else "")


def render_raycluster(settings: Settings) -> dict[str, Any]:
    from .render import render_objects
    (obj,) = render_objects("raycluster.yaml.j2", settings, rc=raycluster_values(settings))
    return obj


def render_rayjob(settings: Settings, **kw: Any) -> dict[str, Any]:
    from .render import render_objects
    (obj,) = render_objects("rayjob.yaml.j2", settings, rc=raycluster_values(settings),
                            rj=rayjob_values(settings, **kw))
    return obj


def operator_values(settings: Settings) -> dict[str, Any]:
    return dict(namespace=OPERATOR_NAMESPACE, image=OPERATOR_IMAGE.format(version=settings.versions.kuberay_version))


def render_operator(settings: Settings) -> list[dict[str, Any]]:
    from .render import render_objects
    return render_objects("kuberay-operator.yaml.j2", settings, op=operator_values(settings))


def render_namespace(settings: Settings) -> dict[str, Any]:
    from .render import render_objects
    (obj,) = render_objects("namespace.yaml.j2", settings, ns_name=settings.kubernetes.namespace)
    return obj


# ============================================================================================
# Structural checks (used by the tests and by step() before anything is applied)
# ============================================================================================

def _container(pod_spec: dict, name: str | None = None) -> dict:
    cs = (pod_spec or {}).get("containers") or []
    if name:
        for c in cs:
            if c.get("name") == name:
                return c
    return cs[0] if cs else {}


def _env(container: dict) -> dict[str, str]:
    return {e.get("name"): e.get("value") for e in container.get("env") or [] if "name" in e}


def _mount_volume(pod_spec: dict, container: dict, path: str) -> dict | None:
    names = [m.get("name") for m in container.get("volumeMounts") or [] if m.get("mountPath", "").rstrip("/")
             == path.rstrip("/")]
    for v in pod_spec.get("volumes") or []:
        if v.get("name") in names:
            return v
    return None


def _tolerates(pod_spec: dict, key: str) -> bool:
    taint = {"key": key, "value": "true", "effect": "NoSchedule"}
    return any(k8s.toleration_matches(t, taint) for t in pod_spec.get("tolerations") or [])


def _requests_equal_limits(container: dict, where: str, names: tuple[str, ...]) -> list[str]:
    res = container.get("resources") or {}
    req, lim = res.get("requests") or {}, res.get("limits") or {}
    out = []
    for n in names:
        if n not in req or n not in lim:
            out.append(f"{where}: resources.requests and .limits must both set {n}. Fix: requests = limits")
        elif k8s.quantity(req[n]) != k8s.quantity(lim[n]):
            out.append(f"{where}: {n} request {req[n]} != limit {lim[n]}. Fix: requests = limits "
                       f"(Guaranteed QoS; no throttling or OOM surprises)")
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
    bad = [x for x in chosen if any(x == e or (e != "lo" and x.startswith(e)) for e in SOCKET_IFNAME_EXCLUDE)
           or x.startswith("lo")]
    return [f"NCCL_SOCKET_IFNAME={value!r} selects {', '.join(sorted(bad))}"] if bad else []


def check_raycluster(obj: dict, settings: Settings) -> list[str]:
    """Problems that would make the RayCluster misbehave on EKS ([] = none). Each names the fix."""
    if obj.get("apiVersion") != RAY_API or obj.get("kind") != "RayCluster":
        return [f"not a {RAY_API} RayCluster (apiVersion {obj.get('apiVersion')!r}, kind {obj.get('kind')!r})"]
    spec = obj.get("spec") or {}
    return _check_cluster_spec(spec, settings, "RayCluster")


def _check_cluster_spec(spec: dict, settings: Settings, what: str) -> list[str]:
    p: list[str] = []
    v = settings.versions
    a = settings.aws
    if spec.get("rayVersion") != v.ray_version:
        p.append(f"{what}.spec.rayVersion = {spec.get('rayVersion')!r} but RAY_VERSION is {v.ray_version!r}. "
                 f"Fix: rayVersion must be the image's Ray version")
    if spec.get("enableInTreeAutoscaling"):
        p.append(f"{what}: the autoscaler is on; this tutorial uses a fixed-size group. Fix: "
                 f"enableInTreeAutoscaling: false")
    # ---- head
    head = spec.get("headGroupSpec") or {}
    hp = head.get("rayStartParams") or {}
    hspec = ((head.get("template") or {}).get("spec")) or {}
    hc = _container(hspec)
    if str(hp.get("num-gpus")) != "0" or "num-gpus" not in hp:
        p.append(f'head: rayStartParams num-gpus must be "0" (found {hp.get("num-gpus")!r}). Fix: the head runs '
                 f'on the CPU system node and must never be offered GPU work')
    if (head.get("serviceType") or "ClusterIP") != "ClusterIP":
        p.append(f"head: serviceType {head.get('serviceType')!r} exposes the dashboard. Fix: ClusterIP (use the "
                 f"port-forward of kuberay.job_server)")
    if (hspec.get("nodeSelector") or {}).get("role") != "system":
        p.append("head: nodeSelector role=system is missing. Fix: the head belongs on the system node")
    if hc.get("image") != v.dlc_image:
        p.append(f"head: image {hc.get('image')!r} is not DLC_IMAGE {v.dlc_image!r}")
    if _env(hc).get("NVIDIA_VISIBLE_DEVICES") != "void":
        p.append("head: env NVIDIA_VISIBLE_DEVICES=void is missing. Fix: hide GPUs from the head container")
    ports = {pt.get("containerPort") for pt in hc.get("ports") or []}
    for port in (6379, 8265, 10001):
        if port not in ports:
            p.append(f"head: container port {port} is not declared. Fix: ports 6379 (GCS), 8265 (dashboard/jobs), "
                     f"10001 (client)")
    vol = _mount_volume(hspec, hc, "/tmp/ray")
    if not vol or "emptyDir" not in vol:
        p.append("head: /tmp/ray is not an emptyDir volume. Fix: mount an emptyDir at /tmp/ray (logs)")
    pre = (((hc.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
    if "ray stop" not in " ".join(pre):
        p.append("head: lifecycle.preStop does not run `ray stop`. Fix: preStop exec ray stop")
    p += _requests_equal_limits(hc, "head", ("cpu", "memory"))
    try:
        want = head_size(settings)
        req = (hc.get("resources") or {}).get("requests") or {}
        if k8s.quantity(req.get("cpu")) > want.cpu or k8s.quantity(req.get("memory")) > want.memory_gib * 2**30:
            p.append(f"head: requests cpu={req.get('cpu')} memory={req.get('memory')} exceed what a "
                     f"{a.system_node_type} leaves free ({want.cpu} CPU, {want.memory_gib}Gi). Fix: smaller requests")
    except ConfigError as e:
        p.append(str(e))
    # ---- workers
    groups = spec.get("workerGroupSpecs") or []
    if len(groups) != 1:
        p.append(f"{what}: expected one worker group (one pod per GPU node), found {len(groups)}")
    for g in groups:
        name = f"worker group {g.get('groupName')!r}"
        n = a.gpu_node_count
        reps = (g.get("replicas"), g.get("minReplicas"), g.get("maxReplicas"))
        if reps != (n, n, n):
            p.append(f"{name}: replicas/minReplicas/maxReplicas = {reps} but GPU_NODE_COUNT = {n}. Fix: all three = {n}")
        rp = g.get("rayStartParams") or {}
        if str(rp.get("num-gpus")) != str(a.gpus_per_node):
            p.append(f"{name}: rayStartParams num-gpus = {rp.get('num-gpus')!r}, GPUS_PER_NODE = {a.gpus_per_node}")
        res = parse_ray_resources(rp.get("resources", "")) if rp.get("resources") else None
        if not res or res.get(TRAIN_SLOT) != a.gpus_per_node:
            p.append(f"{name}: rayStartParams resources must give {TRAIN_SLOT} = {a.gpus_per_node} as shell-quoted "
                     f"JSON (found {rp.get('resources')!r}). Fix: {resources_param(a.gpus_per_node)}")
        wspec = ((g.get("template") or {}).get("spec")) or {}
        wc = _container(wspec)
        if wc.get("image") != v.dlc_image:
            p.append(f"{name}: image {wc.get('image')!r} is not DLC_IMAGE {v.dlc_image!r} (head and workers run "
                     f"the same tag)")
        if (wspec.get("nodeSelector") or {}).get("role") != "gpu-worker":
            p.append(f"{name}: nodeSelector role=gpu-worker is missing")
        for key in ("nvidia.com/gpu", "aws.amazon.com/efa"):
            if not _tolerates(wspec, key):
                p.append(f"{name}: no toleration for the {key} taint of the GPU nodes. Fix: "
                         f"{{key: {key}, operator: Exists, effect: NoSchedule}}")
        res_ = (wc.get("resources") or {})
        req, lim = res_.get("requests") or {}, res_.get("limits") or {}
        for r, want_n in ((k8s.GPU_RESOURCE, a.gpus_per_node), (k8s.EFA_RESOURCE, None)):
            if r not in req or r not in lim:
                p.append(f"{name}: {r} must be requested (requests and limits). Fix: "
                         + ("the pod must claim every GPU of the node" if want_n else
                            "without an EFA request the pod gets no EFA device and NCCL falls back to TCP sockets"))
                continue
            got = int(k8s.quantity(req[r]))
            if want_n is not None and got != want_n:
                p.append(f"{name}: {r} = {got}, GPUS_PER_NODE = {want_n}")
            if want_n is None and got < 1:
                p.append(f"{name}: {r} = {got}. Fix: at least 1")
        p += _requests_equal_limits(wc, name, ("cpu", "memory", k8s.GPU_RESOURCE, k8s.EFA_RESOURCE))
        ws = worker_size(settings)
        if k8s.quantity(req.get("cpu")) > ws.cpu or k8s.quantity(req.get("memory")) > ws.memory_gib * 2**30:
            p.append(f"{name}: requests cpu={req.get('cpu')} memory={req.get('memory')} exceed what a "
                     f"{a.gpu_node_type} leaves free ({ws.cpu} CPU, {ws.memory_gib}Gi)")
        shm = _mount_volume(wspec, wc, "/dev/shm")
        if not shm or (shm.get("emptyDir") or {}).get("medium") != "Memory":
            p.append(f"{name}: /dev/shm is not a memory-backed emptyDir. Fix: volume emptyDir {{medium: Memory}} "
                     f"mounted at /dev/shm (NCCL and the object store need more than the 64 MiB default)")
        env = _env(wc)
        if env.get("FI_PROVIDER") != "efa":
            p.append(f"{name}: FI_PROVIDER = {env.get('FI_PROVIDER')!r}. Fix: FI_PROVIDER=efa")
        if env.get("NCCL_NET_PLUGIN") != "ofi":
            p.append(f"{name}: NCCL_NET_PLUGIN = {env.get('NCCL_NET_PLUGIN')!r}. Fix: NCCL_NET_PLUGIN=ofi")
        for msg in socket_ifname_problems(env.get("NCCL_SOCKET_IFNAME")):
            p.append(f"{name}: {msg}. Fix: NCCL_SOCKET_IFNAME={NCCL_SOCKET_IFNAME}")
        if not env.get("NCCL_DEBUG"):
            p.append(f"{name}: NCCL_DEBUG is not set. Fix: NCCL_DEBUG=INFO (the transport audit reads its log)")
        pre = (((wc.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
        if "ray stop" not in " ".join(pre):
            p.append(f"{name}: lifecycle.preStop does not run `ray stop`")
    return p


def check_rayjob(obj: dict, settings: Settings) -> list[str]:
    if obj.get("apiVersion") != RAY_API or obj.get("kind") != "RayJob":
        return [f"not a {RAY_API} RayJob"]
    spec = obj.get("spec") or {}
    p = []
    if spec.get("entrypoint") != JOB_ENTRYPOINT:
        p.append(f"RayJob: entrypoint {spec.get('entrypoint')!r}, expected {JOB_ENTRYPOINT!r}")
    if spec.get("submissionMode") not in SUBMISSION_MODES:
        p.append(f"RayJob: submissionMode {spec.get('submissionMode')!r}, expected one of {SUBMISSION_MODES}")
    if spec.get("shutdownAfterJobFinishes") is not True:
        p.append("RayJob: shutdownAfterJobFinishes must be true (the GPU pods are released after the job)")
    return p + _check_cluster_spec(spec.get("rayClusterSpec") or {}, settings, "RayJob.rayClusterSpec")


# ============================================================================================
# Results
# ============================================================================================

@dataclass
class KubeRayResult:
    target: str
    action: str
    ok: bool
    message: str = ""
    problems: list[str] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    mapping: list[tuple[str, str, str]] = field(default_factory=list)
    manifest_yaml: str = ""
    install_method: str = ""
    state: str = ""
    deleted: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def pod_rows(self) -> list[tuple]:
        return [(p["pod"], p["role"], p["phase"], "yes" if p["ready"] else "no", p["node"], p["instance_type"],
                 p["zone"]) for p in self.pods]

    def show(self) -> None:
        print(f"KubeRay ({self.target}, {self.action}): {'OK' if self.ok else 'NOT OK'}"
              + (f" - {self.message}" if self.message else ""))
        if self.install_method:
            print(f"  operator installed with: {self.install_method}")
        if self.state:
            print(f"  RayCluster state: {self.state}")
        if self.manifest_yaml:
            print("RayCluster manifest (abridged; `raytrain-tutorial render --out DIR` writes it in full):")
            print(self.manifest_yaml.rstrip())
        if self.mapping:
            k8s.table(self.mapping, ["RayCluster manifest", "local stand-in", "found"],
                      title="What stands in for each part of the manifest on this machine")
        if self.pods:
            k8s.table(self.pod_rows(), ["pod", "role", "phase", "ready", "node", "instance type", "zone"],
                      title="Pod placement")
        if self.deleted:
            k8s.table(self.deleted, ["object", "state"], title="Teardown (verified by listing)")
        for x in self.problems:
            print(f"  PROBLEM: {x}")
        for x in self.diagnosis:
            print(f"  DIAGNOSIS: {x}")


# ============================================================================================
# Cluster facts
# ============================================================================================

def _cluster_selector(settings: Settings) -> str:
    return f"ray.io/cluster={settings.kubernetes.ray_cluster_name}"


def cluster_pods(client, settings: Settings) -> list[dict]:
    return k8s.list_objects(client, "v1", "Pod", settings.kubernetes.namespace,
                            label_selector=_cluster_selector(settings))


def _role(pod: dict) -> str:
    return k8s.labels(pod).get("ray.io/node-type", "?")


def placement(pods: list[dict], nodes: list[dict]) -> list[dict[str, Any]]:
    by_name = {k8s.name_of(n): k8s.node_row(n) for n in nodes}
    out = []
    for p in sorted(pods, key=lambda x: (_role(x) != "head", k8s.name_of(x))):
        node = (p.get("spec") or {}).get("nodeName") or ""
        nr = by_name.get(node, {})
        out.append(dict(pod=k8s.name_of(p), role=_role(p), phase=(p.get("status") or {}).get("phase", "?"),
                        ready=k8s.pod_ready(p), node=node or "(not scheduled)",
                        instance_type=nr.get("instance_type", "-"), zone=nr.get("zone", "-")))
    return out


def _pod_requests(pod: dict) -> dict[str, float]:
    tot: dict[str, float] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            tot[k] = tot.get(k, 0.0) + k8s.quantity(v)
    return tot


def _free_on(node: dict, pods: list[dict], exclude: set[str]) -> dict[str, float]:
    alloc = {k: k8s.quantity(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
    for p in pods:
        if (p.get("spec") or {}).get("nodeName") != k8s.name_of(node) or k8s.name_of(p) in exclude:
            continue
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for k, v in _pod_requests(p).items():
            alloc[k] = alloc.get(k, 0.0) - v
    return alloc


def _fmt(resource: str, v: float) -> str:
    if resource == "memory":
        return f"{v / 2**30:.1f}Gi"
    if resource == "cpu":
        return f"{v:g}"
    return f"{int(v)}"


def preflight(client, settings: Settings, rc: dict, *, operator_present: bool) -> list[str]:
    """Can the RayCluster's pods be placed right now? Checks live allocatable minus what already runs."""
    nodes = k8s.list_objects(client, "v1", "Node")
    pods = k8s.list_objects(client, "v1", "Pod")
    ours = {k8s.name_of(p) for p in pods if k8s.labels(p).get("ray.io/cluster") == settings.kubernetes.ray_cluster_name}
    spec = rc["spec"]
    head_c = _container(spec["headGroupSpec"]["template"]["spec"])
    wg = spec["workerGroupSpecs"][0]
    work_c = _container(wg["template"]["spec"])
    head_req = {k: k8s.quantity(v) for k, v in (head_c.get("resources") or {}).get("requests", {}).items()}
    work_req = {k: k8s.quantity(v) for k, v in (work_c.get("resources") or {}).get("requests", {}).items()}
    if not operator_present:
        head_req["cpu"] = head_req.get("cpu", 0) + OPERATOR_REQUESTS[0] / 1000
        head_req["memory"] = head_req.get("memory", 0) + OPERATOR_REQUESTS[1] * 2**30
    problems = []

    def short(node, req, tolerations_spec) -> list[str]:
        free = _free_on(node, pods, ours)
        miss = []
        for r, v in req.items():
            if free.get(r, 0.0) + 1e-9 < v:
                alloc = k8s.quantity(((node.get("status") or {}).get("allocatable") or {}).get(r))
                msg = f"{r} free {_fmt(r, free.get(r, 0.0))} of allocatable {_fmt(r, alloc)}, needs {_fmt(r, v)}"
                if alloc + 1e-9 >= v:   # the node has it, other pods hold it
                    users = [k8s.name_of(p) for p in pods if (p.get("spec") or {}).get("nodeName") == k8s.name_of(node)
                             and k8s.name_of(p) not in ours and _pod_requests(p).get(r)
                             and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
                    msg += f" (held by {', '.join(users[:4])}{'...' if len(users) > 4 else ''})"
                miss.append(msg)
        miss += [f"untolerated taint {t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                 for t in k8s.untolerated_taints(tolerations_spec.get("tolerations") or [], node)]
        return miss

    sys_nodes = [n for n in nodes if k8s.labels(n).get("role") == "system"]
    if not sys_nodes:
        problems.append("no node is labelled role=system: the head (and the operator) have nowhere to run. "
                        "Fix: the system nodegroup needs the label role=system (notebook 02)")
    else:
        why = {k8s.name_of(n): short(n, head_req, spec["headGroupSpec"]["template"]["spec"]) for n in sys_nodes}
        if all(why.values()):
            for n, w in why.items():
                problems.append(f"system node {n} cannot take the Ray head" + (" and the operator" if not
                                operator_present else "") + ": " + "; ".join(w)
                                + f". Fix: a larger SYSTEM_NODE_TYPE than {settings.aws.system_node_type}, or fewer "
                                  f"pods on it")
    gpu_nodes = [n for n in nodes if k8s.labels(n).get("role") == "gpu-worker"]
    need = settings.aws.gpu_node_count
    fit, reasons = 0, []
    for n in gpu_nodes:
        w = short(n, work_req, wg["template"]["spec"])
        if not w:
            fit += 1
        else:
            hint = ""
            if any((x.startswith(k8s.GPU_RESOURCE) or x.startswith(k8s.EFA_RESOURCE)) and "held by" not in x
                   for x in w):
                hint = " -> the device plugins are missing or unhealthy: run notebook 03 (plugins.step)"
            elif any("held by" in x for x in w):
                hint = (" -> other pods hold it (a RayJob's cluster, an earlier RayCluster under another name?): "
                        "delete them first")
            reasons.append(f"GPU node {k8s.name_of(n)}: " + "; ".join(w) + hint)
    if fit < need:
        problems.append(f"only {fit} of the {len(gpu_nodes)} GPU node(s) (role=gpu-worker) can take a worker pod; "
                        f"GPU_NODE_COUNT = {need}" + ("" if gpu_nodes else
                                                     ". Fix: create the GPU nodegroup (notebook 02)"))
        problems += reasons
    return problems


def _spec_diff(want: Any, have: Any, path: str = "spec") -> list[str]:
    """Fields of ``want`` that ``have`` lacks or holds differently (server defaults in ``have`` are ignored)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [path]
        out = []
        for k, v in want.items():
            out += _spec_diff(v, have.get(k), f"{path}.{k}")
        return out
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return [path]
        out = []
        for i, (a, b) in enumerate(zip(want, have)):
            out += _spec_diff(a, b, f"{path}[{i}]")
        return out
    if want != have and not (isinstance(want, (int, float, str)) and str(want) == str(have)):
        return [path]
    return []


# ============================================================================================
# The operator
# ============================================================================================

def _helm() -> str | None:
    return shutil.which("helm")


def _helm_base(client) -> list[str]:
    args = []
    ctx = k8s.context_of(client)
    if ctx:
        args += ["--kube-context", ctx]
    kc = client.__dict__.get("_raytrain_kubeconfig")
    if kc:
        args += ["--kubeconfig", kc]
    return args


def run_helm(args: list[str], *, timeout_s: float = 600) -> subprocess.CompletedProcess:
    exe = _helm()
    if exe is None:
        raise k8s.K8sError("helm is not on PATH")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise k8s.K8sError(f"helm {' '.join(args[:3])} failed ({proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()[-800:]}")
    return proc


def find_operator(client) -> dict | None:
    deps = k8s.list_objects(client, "apps/v1", "Deployment", None,
                            label_selector="app.kubernetes.io/name=kuberay-operator")
    return deps[0] if deps else None


def crd_dir(settings: Settings) -> Path | None:
    """Where the release's CRD files are: RAYTRAIN_KUBERAY_CRDS, or <repo>/../shared/kuberay-crds/v<version>."""
    env = os.environ.get("RAYTRAIN_KUBERAY_CRDS")
    cands = [Path(env)] if env else []
    repo = Path(__file__).resolve().parent.parent
    cands.append(repo.parent / "shared" / "kuberay-crds" / f"v{settings.versions.kuberay_version}")
    for c in cands:
        if c.is_dir() and any(c.glob("ray.io_*.yaml")):
            return c
    return None


def install_operator(client, settings: Settings, *, log=print) -> str:
    """Install (or upgrade to) the pinned operator; returns how. Idempotent."""
    ver = settings.versions.kuberay_version
    if _helm():
        with tempfile.TemporaryDirectory() as td:
            values = Path(td) / "values.yaml"
            values.write_text(yaml.safe_dump({"nodeSelector": {"role": "system"}}))
            run_helm(["upgrade", "--install", OPERATOR_RELEASE, "kuberay-operator", "--repo", KUBERAY_HELM_REPO,
                      "--version", ver, "--namespace", OPERATOR_NAMESPACE, "--create-namespace", "-f", str(values),
                      *_helm_base(client)])
        log(f"helm: kuberay-operator {ver} installed in {OPERATOR_NAMESPACE}")
        return f"helm chart kuberay-operator {ver}"
    have = k8s.get(client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "rayclusters.ray.io")
    if have is None:
        d = crd_dir(settings)
        if d is None:
            raise k8s.K8sError(
                f"the KubeRay CRDs are not installed and neither helm nor the CRD files of v{ver} are here. Fix: "
                f"install helm (the reference path), or set RAYTRAIN_KUBERAY_CRDS to a folder with "
                f"ray.io_rayclusters.yaml/ray.io_rayjobs.yaml of v{ver}, or run `kubectl apply --server-side -k "
                f"\"github.com/ray-project/kuberay/ray-operator/config/crd?ref=v{ver}\"`")
        for f in sorted(d.glob("ray.io_*.yaml")):
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            for crd in (x for x in yaml.load_all(f.read_text(), Loader=loader) if x):
                crd.setdefault("metadata", {}).setdefault("labels", {})["app.kubernetes.io/part-of"] = k8s.PART_OF
                k8s.apply(client, crd)
        log(f"applied the KubeRay v{ver} CRDs from {d}")
    for obj in render_operator(settings):
        k8s.apply(client, obj)
    log(f"applied the KubeRay operator v{ver} manifests ({OPERATOR_NAMESPACE})")
    return f"rendered manifests (operator v{ver})"


def _deployment_ready(dep: dict | None) -> bool:
    st = (dep or {}).get("status") or {}
    return bool(dep) and (st.get("readyReplicas") or 0) >= max(1, (dep.get("spec") or {}).get("replicas", 1) or 1)


def operator_version(dep: dict | None) -> str:
    """The operator image's tag (``v1.4.0``)."""
    c = _container(((((dep or {}).get("spec") or {}).get("template") or {}).get("spec")) or {})
    image = c.get("image") or ""
    return image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""


def diagnose_operator(client, dep: dict | None) -> list[str]:
    if dep is None:
        return ["the KubeRay operator Deployment was not found after the install"]
    st = dep.get("status") or {}
    out = [f"the KubeRay operator Deployment {k8s.name_of(dep)} is not Ready (ready {st.get('readyReplicas') or 0}"
           f"/{(dep.get('spec') or {}).get('replicas', 1)}, image tag {operator_version(dep) or '?'})"]
    sel = ",".join(f"{k}={v}" for k, v in (((dep.get("spec") or {}).get("selector") or {})
                                            .get("matchLabels") or {}).items())
    for p in k8s.list_objects(client, "v1", "Pod", (dep.get("metadata") or {}).get("namespace"), label_selector=sel):
        out.append(f"operator pod {k8s.name_of(p)}: {k8s.pod_problem(p) or 'no problem reported'}")
    return out


# ============================================================================================
# Step 04
# ============================================================================================

def abridged(obj: dict) -> str:
    """The parts of the RayCluster that matter, as YAML."""
    spec = obj["spec"]
    head = spec["headGroupSpec"]
    hc = _container(head["template"]["spec"])
    out: dict[str, Any] = {
        "apiVersion": obj["apiVersion"], "kind": obj["kind"],
        "metadata": {k: obj["metadata"][k] for k in ("name", "namespace")},
        "spec": {
            "rayVersion": spec["rayVersion"],
            "headGroupSpec": {"rayStartParams": head.get("rayStartParams"),
                              "nodeSelector": head["template"]["spec"].get("nodeSelector"),
                              "image": hc.get("image"), "resources": hc.get("resources", {}).get("limits")},
            "workerGroupSpecs": [],
        },
    }
    for g in spec.get("workerGroupSpecs") or []:
        wc = _container(g["template"]["spec"])
        out["spec"]["workerGroupSpecs"].append({
            "groupName": g["groupName"], "replicas": g.get("replicas"), "rayStartParams": g.get("rayStartParams"),
            "nodeSelector": g["template"]["spec"].get("nodeSelector"),
            "resources": wc.get("resources", {}).get("limits"),
            "env": {e["name"]: e.get("value") for e in wc.get("env") or []},
            "volumes": [v["name"] + (" (memory)" if (v.get("emptyDir") or {}).get("medium") == "Memory" else "")
                        for v in g["template"]["spec"].get("volumes") or []],
        })
    return yaml.safe_dump(out, sort_keys=False, width=120)


def _local_target():
    from .targets import local
    return local


def _step_local(settings: Settings, obj: dict) -> KubeRayResult:
    info = _local_target().status(settings)
    rc = obj["spec"]
    head = info.head if hasattr(info, "head") else next((n for n in info.nodes if n["role"] == "head"), None)
    workers = [n for n in info.nodes if n["role"] == "worker"]
    hres = (head or {}).get("resources", {})
    w_gpus = [int(w.get("resources", {}).get("GPU", 0)) for w in workers]
    w_slots = [int(w.get("resources", {}).get(TRAIN_SLOT, 0)) for w in workers]
    g = rc["workerGroupSpecs"][0]
    mapping = [
        ("headGroupSpec: head pod on the system node, num-gpus \"0\"",
         "head raylet (--num-cpus 0 --num-gpus 0)",
         f"CPU {hres.get('CPU', 0):g}, GPU {hres.get('GPU', 0):g}" if head else "no head"),
        (f"workerGroupSpecs[{g['groupName']}].replicas = {g['replicas']} (one pod per GPU node)",
         f"worker raylets (local.worker_nodes = {settings.local.worker_nodes})", f"{len(workers)} alive"
         if workers else "none"),
        (f"num-gpus = {g['rayStartParams']['num-gpus']} and nvidia.com/gpu per worker pod",
         "GPUs per worker raylet (CUDA_VISIBLE_DEVICES split)", ", ".join(map(str, w_gpus)) or "-"),
        (f"rayStartParams resources {TRAIN_SLOT} = {settings.aws.gpus_per_node}",
         f"{TRAIN_SLOT} per worker raylet (GPUs, or CPU slots on CPU)", ", ".join(map(str, w_slots)) or "-"),
        ("vpc.amazonaws.com/efa + FI_PROVIDER=efa, NCCL_NET_PLUGIN=ofi",
         "none: NCCL uses P2P/SHM inside this machine, gloo on CPU", "-"),
        ("head Service (ClusterIP :8265) + port-forward", "dashboard/jobs on 127.0.0.1", info.dashboard_url),
    ]
    problems = []
    if not info.running:
        problems.append("the local cluster is not running. Fix: notebook 02 (cluster.step(settings, 'up'))")
    else:
        if head is None or hres.get("GPU", 0) or hres.get(TRAIN_SLOT, 0):
            problems.append("the head raylet offers GPUs or train slots; training could land on it")
        if not workers or not all(s > 0 for s in w_slots):
            problems.append(f"a worker raylet has no {TRAIN_SLOT}: training workers cannot be placed there")
    return KubeRayResult("local", "up", not problems, message="RayCluster rendered; the local raylets stand in",
                         problems=problems, mapping=mapping, manifest_yaml=abridged(obj))


def step(settings: Settings, *, assume_yes: bool = False, timeout_s: float = 900, poll_s: float = 5.0,
         client=None, log=print) -> KubeRayResult:
    """Notebook 04's entry point."""
    t0 = time.monotonic()
    obj = render_raycluster(settings)
    problems = check_raycluster(obj, settings)
    if settings.target == "local":
        res = _step_local(settings, obj)
        res.problems = problems + res.problems
        res.ok = not res.problems
        return res
    if problems:
        return KubeRayResult("aws", "up", False, "the rendered RayCluster failed its checks; nothing was applied",
                             problems=problems)
    own = client is None
    client = client or k8s.api_client(settings)
    try:
        return _step_aws(client, settings, obj, assume_yes=assume_yes, timeout_s=timeout_s, poll_s=poll_s,
                         log=log, t0=t0)
    except k8s.K8sError as e:
        return KubeRayResult("aws", "up", False, str(e), elapsed_s=time.monotonic() - t0)
    finally:
        if own:
            client.close()


def _step_aws(client, settings, obj, *, assume_yes, timeout_s, poll_s, log, t0) -> KubeRayResult:
    ns, name = settings.kubernetes.namespace, settings.kubernetes.ray_cluster_name
    op = find_operator(client)
    pre = preflight(client, settings, obj, operator_present=op is not None)
    if pre:
        return KubeRayResult("aws", "up", False, "the nodes cannot host the RayCluster; nothing was applied",
                             problems=pre, elapsed_s=time.monotonic() - t0)
    existing = k8s.get(client, RAY_API, "RayCluster", name, ns)
    if existing is not None:
        diff = _spec_diff(obj["spec"], existing.get("spec") or {})
        if diff:
            if not assume_yes:
                return KubeRayResult(
                    "aws", "up", False,
                    f"RayCluster {ns}/{name} exists with a different spec ({', '.join(diff[:5])}"
                    f"{'...' if len(diff) > 5 else ''}); KubeRay does not restart running pods for it",
                    problems=["Fix: step(settings, assume_yes=True) deletes and recreates it, or "
                              "kuberay.teardown(settings, assume_yes=True) first"], elapsed_s=time.monotonic() - t0)
            log(f"deleting RayCluster {ns}/{name} (its spec changed: {', '.join(diff[:3])})")
            k8s.delete(client, RAY_API, "RayCluster", name, ns)
            gone = k8s.wait_for(lambda: (k8s.get(client, RAY_API, "RayCluster", name, ns) is None
                                         and not cluster_pods(client, settings), None),
                                timeout_s=min(300, timeout_s), interval_s=poll_s)
            if not gone.ok:
                return KubeRayResult("aws", "up", False, f"the old RayCluster {ns}/{name} did not go away",
                                     elapsed_s=time.monotonic() - t0)
    want_tag = f"v{settings.versions.kuberay_version}"
    if op is None or operator_version(op) != want_tag:
        method = install_operator(client, settings, log=log)
    else:
        method = f"already installed ({k8s.name_of(op)} {want_tag} in {(op.get('metadata') or {}).get('namespace')})"

    def op_ready():
        dep = find_operator(client)
        crd = k8s.get(client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "rayclusters.ray.io")
        return _deployment_ready(dep) and operator_version(dep) == want_tag and crd is not None, dep
    w = k8s.wait_for(op_ready, timeout_s=max(1.0, min(300, timeout_s - (time.monotonic() - t0))),
                     interval_s=poll_s)
    if not w.ok:
        return KubeRayResult("aws", "up", False, "KubeRay operator not ready",
                             diagnosis=diagnose_operator(client, w.value if isinstance(w.value, dict) else None),
                             install_method=method, elapsed_s=time.monotonic() - t0)
    k8s.apply(client, render_namespace(settings))
    k8s.apply(client, obj)
    log(f"applied RayCluster {ns}/{name} (server-side apply, field manager {k8s.FIELD_MANAGER})")
    # a plugin can disappear between notebook 03 and now: fail fast rather than wait on Pending pods
    pre = preflight(client, settings, obj, operator_present=True)
    if pre:
        return KubeRayResult("aws", "up", False, "the nodes can no longer host the RayCluster (checked after apply)",
                             problems=pre, install_method=method, elapsed_s=time.monotonic() - t0)
    n = settings.aws.gpu_node_count
    last = [""]
    stuck: list[str] = []

    def probe():
        pods = cluster_pods(client, settings)
        heads = [p for p in pods if _role(p) == "head"]
        workers = [p for p in pods if _role(p) == "worker"]
        running = [p for p in workers if (p.get("status") or {}).get("phase") == "Running"]
        ready = bool(heads) and all(k8s.pod_ready(h) for h in heads)
        line = f"head {'Ready' if ready else 'not ready'}, workers Running {len(running)}/{n}"
        if line != last[0]:
            log(f"  [{time.monotonic() - t0:5.0f}s] {line}")
            last[0] = line
        if ready and len(running) >= n:
            return True, pods
        stuck[:] = [f"{_role(p)} pod {k8s.name_of(p)}: {why}" for p in pods if (why := crash_looping(p))]
        return bool(stuck), pods
    remaining = max(1.0, timeout_s - (time.monotonic() - t0))
    w = k8s.wait_for(probe, timeout_s=remaining, interval_s=poll_s)
    ok = w.ok and not stuck
    pods = w.value if isinstance(w.value, list) else cluster_pods(client, settings)
    nodes = k8s.list_objects(client, "v1", "Node")
    rc_live = k8s.get(client, RAY_API, "RayCluster", name, ns) or {}
    elapsed = time.monotonic() - t0
    msg = (f"RayCluster {ns}/{name} ready" if ok else
           f"RayCluster {ns}/{name} not ready after {elapsed:.0f} s: stopped waiting, a pod is crash-looping"
           if stuck else f"RayCluster {ns}/{name} not ready after {timeout_s:g} s")
    res = KubeRayResult("aws", "up", ok, msg, pods=placement(pods, nodes), install_method=method,
                        state=str((rc_live.get("status") or {}).get("state", "")), elapsed_s=elapsed)
    if not ok:
        res.diagnosis = stuck + diagnose_cluster(client, settings, pods, nodes, rc_live)
    return res


#: Container states that do not get better by waiting (the image or the pod spec must change).
HOPELESS_WAITING = ("CrashLoopBackOff", "InvalidImageName", "CreateContainerConfigError", "ErrImageNeverPull")
#: A container that restarted this often without becoming Ready is crash-looping.
CRASH_RESTARTS = 3


def crash_looping(pod: dict) -> str:
    """Why a pod will not become Ready by waiting ("" = it may still): a container in CrashLoopBackOff
    (or another state only a fix ends), or restarted CRASH_RESTARTS times without being Ready."""
    if k8s.pod_ready(pod):
        return ""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in HOPELESS_WAITING:
            return f"container {cs.get('name')} {waiting['reason']} (restarts {cs.get('restartCount', 0)})"
        if (cs.get("restartCount") or 0) >= CRASH_RESTARTS and not cs.get("ready"):
            last = ((cs.get("lastState") or {}).get("terminated")) or {}
            return (f"container {cs.get('name')} restarted {cs['restartCount']} times without becoming Ready"
                    + (f" (last exit: {last.get('reason')} {last.get('exitCode')})" if last else ""))
    return ""


def diagnose_cluster(client, settings: Settings, pods: list[dict], nodes: list[dict], rc_live: dict) -> list[str]:
    out = []
    st = rc_live.get("status") or {}
    if not pods:
        dep = find_operator(client)
        out.append("the KubeRay operator created no pods for the RayCluster"
                   + (f" (RayCluster state {st.get('state')!r}, reason {st.get('reason')!r})" if st else "")
                   + ("; the operator Deployment is missing" if dep is None else
                      "" if _deployment_ready(dep) else "; the operator is not Ready"))
        return out
    heads = [p for p in pods if _role(p) == "head"]
    if not heads:
        out.append("no head pod exists")
    for p in pods:
        phase = (p.get("status") or {}).get("phase")
        role = _role(p)
        if phase == "Pending":
            msg = k8s.pod_problem(p)
            out.append(f"{role} pod {k8s.name_of(p)} Pending: {msg}")
            spec = p.get("spec") or {}
            cands = [n for n in nodes if k8s.labels(n).get("role") == ("system" if role == "head" else "gpu-worker")]
            for n in cands or nodes:
                why = [f"untolerated taint {t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                       for t in k8s.untolerated_taints(spec.get("tolerations") or [], n)]
                why += k8s.selector_misses(spec, n)
                if why:
                    out.append(f"  node {k8s.name_of(n)}: " + "; ".join(why))
            low = msg.lower()
            if "taint" in low:
                out.append("  Fix: the nodes carry a taint the pod does not tolerate: remove it (`kubectl taint nodes "
                           "NODE KEY-`) or add a toleration to manifests/_raycluster_spec.j2")
            elif "insufficient nvidia.com/gpu" in low or "insufficient vpc.amazonaws.com/efa" in low:
                out.append("  Fix: the device plugins do not advertise the GPUs/EFA: run notebook 03 (plugins.step)")
            elif "affinity/selector" in low:
                out.append("  Fix: no node has the label the pod selects (role=system / role=gpu-worker): check the "
                           "nodegroup labels (notebook 02)")
            elif "insufficient" in low:
                out.append("  Fix: the pod's cpu/memory requests exceed the node's free allocatable")
        elif role == "head" and not k8s.pod_ready(p):
            out.append(f"head pod {k8s.name_of(p)} is {phase} but not Ready: {k8s.pod_problem(p) or 'no reason given'}"
                       f". Fix: read its log (`kubectl logs -n {settings.kubernetes.namespace} {k8s.name_of(p)}`); "
                       f"common causes: RAY_VERSION differs from the image's Ray, the GCS cannot start (memory), "
                       f"the image could not be pulled")
        elif phase != "Running":
            out.append(f"{role} pod {k8s.name_of(p)} is {phase}: {k8s.pod_problem(p)}")
    workers = [p for p in pods if _role(p) == "worker"]
    if len(workers) < settings.aws.gpu_node_count:
        out.append(f"only {len(workers)} worker pod(s) exist, GPU_NODE_COUNT = {settings.aws.gpu_node_count}")
    return out


# ============================================================================================
# Status, job server, teardown
# ============================================================================================

def status(settings: Settings, *, client=None) -> KubeRayResult:
    if settings.target == "local":
        info = _local_target().status(settings)
        pods = [dict(pod=n.get("name", n["node_id"][:8]), role=n["role"], phase="ALIVE" if n["alive"] else "DEAD",
                     ready=n["alive"], node="localhost", instance_type="local", zone="-") for n in info.nodes]
        return KubeRayResult("local", "status", info.running, "local raylets" if info.running else
                             "the local cluster is not running", pods=pods)
    own = client is None
    client = client or k8s.api_client(settings)
    try:
        ns, name = settings.kubernetes.namespace, settings.kubernetes.ray_cluster_name
        rc = k8s.get(client, RAY_API, "RayCluster", name, ns)
        pods = cluster_pods(client, settings)
        nodes = k8s.list_objects(client, "v1", "Node")
        op = find_operator(client)
        state = str(((rc or {}).get("status") or {}).get("state", "")) if rc else "absent"
        heads = [p for p in pods if _role(p) == "head"]
        ok = rc is not None and bool(heads) and all(k8s.pod_ready(h) for h in heads) and sum(
            1 for p in pods if _role(p) == "worker" and (p.get("status") or {}).get("phase") == "Running"
        ) >= settings.aws.gpu_node_count
        return KubeRayResult("aws", "status", ok, f"RayCluster {ns}/{name}", pods=placement(pods, nodes), state=state,
                             install_method=("operator " + k8s.name_of(op) + " ready" if _deployment_ready(op) else
                                             "operator not ready") if op else "operator absent")
    except k8s.K8sError as e:
        return KubeRayResult("aws", "status", False, str(e))
    finally:
        if own:
            client.close()


def head_pod(settings: Settings, client=None) -> dict | None:
    own = client is None
    client = client or k8s.api_client(settings)
    try:
        heads = [p for p in cluster_pods(client, settings) if _role(p) == "head"]
        heads.sort(key=lambda p: (not k8s.pod_ready(p), k8s.name_of(p)))
        return heads[0] if heads else None
    finally:
        if own:
            client.close()


def worker_pods(settings: Settings, *, client=None, running_only: bool = True) -> list[str]:
    """Names of the RayCluster's worker pods (sorted), by default only those Running (exec needs it)."""
    own = client is None
    client = client or k8s.api_client(settings)
    try:
        pods = [p for p in cluster_pods(client, settings) if _role(p) == "worker"]
    finally:
        if own:
            client.close()
    if running_only:
        pods = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return sorted(k8s.name_of(p) for p in pods)


#: 06_verify's infrastructure rows on aws (the names report.verify shows).
INFRA_GPU = "GPUs allocatable on every GPU node"
INFRA_EFA = "EFA allocatable on every GPU node"
INFRA_FI = "EFA RDMA capability (fi_info -p efa)"
INFRA_PODS = "head Ready + workers Running"


def fi_info_efa(text: str) -> tuple[bool, str]:
    """Does ``fi_info -p efa`` output show the efa provider with a reliable-datagram (RDM) endpoint?"""
    providers = re.findall(r"^\s*provider:\s*(\S+)", text, re.M)
    types = re.findall(r"^\s*type:\s*(\S+)", text, re.M)
    domains = re.findall(r"^\s*domain:\s*(\S+)", text, re.M)
    efa = "efa" in providers
    rdm = "FI_EP_RDM" in types or any(d.endswith("-rdm") for d in domains)
    if efa and rdm:
        return True, "provider efa, FI_EP_RDM" + (f" ({', '.join(sorted(set(domains)))})" if domains else "")
    if not providers:
        return False, "no provider listed"
    return False, (f"providers {', '.join(sorted(set(providers)))}" + ("" if rdm else ", no FI_EP_RDM endpoint"))


def infra_criteria(settings: Settings, *, client=None) -> list[tuple[str, bool, str]]:
    """06_verify's aws infrastructure rows, from the Kubernetes side: allocatable GPUs and EFA on every
    ``role=gpu-worker`` node, ``fi_info -p efa`` in the worker pods, the head Ready and the workers Running.
    Returns ``[(name, ok, evidence)]``; an unreachable API fails every row with the reason."""
    a = settings.aws
    names = (INFRA_GPU, INFRA_EFA, INFRA_FI, INFRA_PODS)
    own = client is None
    try:
        client = client or k8s.api_client(settings)
        nodes = [k8s.node_row(n) for n in k8s.list_objects(client, "v1", "Node")
                 if k8s.labels(n).get("role") == "gpu-worker"]
        pods = cluster_pods(client, settings)
    except k8s.K8sError as e:
        if own and client is not None:
            client.close()
        return [(n, False, f"Kubernetes API: {e}") for n in names]
    try:
        rows: list[tuple[str, bool, str]] = []
        few = f"; only {len(nodes)} role=gpu-worker node(s), GPU_NODE_COUNT = {a.gpu_node_count}" \
            if len(nodes) < a.gpu_node_count else ""
        bad = [f"{r['name']}={r['gpus']}" for r in nodes if r["gpus"] != a.gpus_per_node]
        rows.append((INFRA_GPU, bool(nodes) and not bad and not few,
                     (f"nvidia.com/gpu: {', '.join(bad)} (GPUS_PER_NODE {a.gpus_per_node})" if bad else
                      f"{len(nodes)} GPU node(s) advertise nvidia.com/gpu={a.gpus_per_node}" if nodes else
                      "no node labelled role=gpu-worker") + few))
        bad = [f"{r['name']}={r['efa']}" for r in nodes if r["efa"] < 1]
        rows.append((INFRA_EFA, bool(nodes) and not bad and not few,
                     (f"vpc.amazonaws.com/efa: {', '.join(bad)}" if bad else
                      f"{len(nodes)} GPU node(s) advertise vpc.amazonaws.com/efa >= 1 ("
                      + ", ".join(str(r["efa"]) for r in nodes) + ")" if nodes else
                      "no node labelled role=gpu-worker") + few))
        workers = sorted((p for p in pods if _role(p) == "worker"), key=k8s.name_of)
        running = [p for p in workers if (p.get("status") or {}).get("phase") == "Running"]
        if not running:
            rows.append((INFRA_FI, False, "no Running worker pod to run fi_info in. Fix: run notebook 04"))
        else:
            seen, fails = [], []
            for p in running:
                try:
                    out = k8s.exec_in_pod(settings, k8s.name_of(p), ["fi_info", "-p", "efa"], client=client,
                                          timeout_s=60)
                    ok, ev = fi_info_efa(out)
                except k8s.ExecError as e:
                    text = (e.stderr or e.stdout or "").strip()
                    ok, ev = False, f"exit {e.returncode}: " + (text.splitlines()[-1] if text else str(e))
                except k8s.K8sError as e:
                    ok, ev = False, str(e)
                (seen if ok else fails).append((k8s.name_of(p), ev))
            ev = (f"{len(seen)}/{len(running)} worker pod(s): {seen[0][1]}" if not fails else
                  "; ".join(f"{n}: {e}" for n, e in fails[:3]) + ". Fix: the pods need a vpc.amazonaws.com/efa "
                  "request on EFA-enabled nodes (notebook 03, efaEnabled in the GPU node group)")
            rows.append((INFRA_FI, not fails, ev))
        heads = [p for p in pods if _role(p) == "head"]
        ready = bool(heads) and all(k8s.pod_ready(h) for h in heads)
        ev = (f"head {'Ready' if ready else 'not Ready' if heads else 'missing'}, workers Running "
              f"{len(running)}/{a.gpu_node_count}")
        if workers and len(running) < len(workers):
            ev += " (" + ", ".join(f"{k8s.name_of(p)} {(p.get('status') or {}).get('phase', '?')}"
                                   for p in workers if p not in running)[:200] + ")"
        rows.append((INFRA_PODS, ready and len(running) >= a.gpu_node_count, ev))
        return rows
    finally:
        if own:
            client.close()


@contextlib.contextmanager
def job_server(settings: Settings, *, connection_factory=None) -> Iterator[str]:
    """The Ray Jobs API address: a 127.0.0.1 port-forward to the head's 8265 (aws), the local dashboard (local)."""
    if settings.target == "local":
        info = _local_target().status(settings)
        if not info.running:
            raise RuntimeError("the local Ray cluster is not running. Fix: notebook 02 (cluster.step(settings, 'up'))")
        yield info.dashboard_url
        return
    head = head_pod(settings)
    if head is None:
        raise k8s.K8sError(f"no Ray head pod for RayCluster {settings.kubernetes.namespace}/"
                           f"{settings.kubernetes.ray_cluster_name}. Fix: run notebook 04 (kuberay.step)")
    if not k8s.pod_ready(head):
        raise k8s.K8sError(f"the Ray head pod {k8s.name_of(head)} is not Ready: {k8s.pod_problem(head)}")
    with k8s.port_forward(settings, k8s.name_of(head), DASHBOARD_PORT,
                          connection_factory=connection_factory) as fwd:
        yield fwd.url


def teardown(settings: Settings, assume_yes: bool = False, *, timeout_s: float = 300, poll_s: float = 5.0,
             client=None, log=print) -> KubeRayResult:
    """Delete the RayCluster (and the RayJob), then the operator; verified by listing. Never prompts."""
    if settings.target == "local":
        return KubeRayResult("local", "teardown", True, "nothing to delete: the local raylets stand in for the "
                             "RayCluster (notebook 08 stops them with cluster.step(settings, 'down'))")
    ns, name = settings.kubernetes.namespace, settings.kubernetes.ray_cluster_name
    if not assume_yes:
        return KubeRayResult("aws", "teardown", False,
                             f"refused: this deletes RayCluster {ns}/{name} and the KubeRay operator. Fix: "
                             f"teardown(settings, assume_yes=True)")
    own = client is None
    client = client or k8s.api_client(settings)
    t0 = time.monotonic()
    try:
        k8s.delete(client, RAY_API, "RayJob", f"{name}-job", ns)
        k8s.delete(client, RAY_API, "RayCluster", name, ns)
        k8s.wait_for(lambda: (not cluster_pods(client, settings), None), timeout_s=timeout_s, interval_s=poll_s)
        op = find_operator(client)
        if op is not None:
            managed = k8s.labels(op).get("app.kubernetes.io/managed-by")
            op_ns = (op.get("metadata") or {}).get("namespace", OPERATOR_NAMESPACE)
            if managed == "Helm" and _helm():
                run_helm(["uninstall", OPERATOR_RELEASE, "--namespace", op_ns, *_helm_base(client)])
                log(f"helm uninstall {OPERATOR_RELEASE} -n {op_ns}")
            elif managed == "Helm":
                log("the operator was installed with Helm but helm is not on PATH: deleting its objects")
        for obj in reversed(render_operator(settings)):
            md = obj["metadata"]
            k8s.delete(client, obj["apiVersion"], obj["kind"], md["name"], md.get("namespace"))
        for crd in k8s.list_objects(client, "apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                    label_selector=f"app.kubernetes.io/part-of={k8s.PART_OF}"):
            k8s.delete(client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", k8s.name_of(crd))
        nso = k8s.get(client, "v1", "Namespace", ns)
        if nso is not None and k8s.labels(nso).get("app.kubernetes.io/part-of") == k8s.PART_OF:
            k8s.delete(client, "v1", "Namespace", ns)

        def verify():
            left = []
            if k8s.get(client, RAY_API, "RayCluster", name, ns) is not None:
                left.append(("RayCluster " + name, "STILL PRESENT"))
            if cluster_pods(client, settings):
                left.append((f"pods ray.io/cluster={name}", "STILL PRESENT"))
            if find_operator(client) is not None:
                left.append(("KubeRay operator Deployment", "STILL PRESENT"))
            nso2 = k8s.get(client, "v1", "Namespace", ns)
            if nso2 is not None and k8s.labels(nso2).get("app.kubernetes.io/part-of") == k8s.PART_OF:
                left.append((f"Namespace {ns}", "STILL PRESENT"))
            return not left, left
        w = k8s.wait_for(verify, timeout_s=timeout_s, interval_s=poll_s)
        rows = [(f"RayCluster {ns}/{name}", "absent"), (f"pods ray.io/cluster={name}", "absent"),
                ("KubeRay operator Deployment", "absent"), (f"Namespace {ns}", "absent")]
        if not w.ok and isinstance(w.value, list):
            left = dict(w.value)
            rows = [(o, left.get(o, s)) for o, s in rows]
        return KubeRayResult("aws", "teardown", w.ok, "RayCluster and operator deleted" if w.ok else
                             "some objects are still there", deleted=rows, elapsed_s=time.monotonic() - t0)
    except k8s.K8sError as e:
        return KubeRayResult("aws", "teardown", False, str(e), elapsed_s=time.monotonic() - t0)
    finally:
        if own:
            client.close()


# ============================================================================================
# CLI: raytrain-tutorial kuberay up|status|down
# ============================================================================================

def register_cli(sub) -> None:
    from .cli import add_settings_args
    p = sub.add_parser("kuberay", help="KubeRay operator + RayCluster (notebook 04): up, status, down")
    p.add_argument("action", choices=("up", "status", "down"))
    p.add_argument("--yes", action="store_true", help="allow destructive actions (down, replacing a changed cluster)")
    p.add_argument("--timeout", type=float, default=900)
    add_settings_args(p)
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from .cli import settings_from_args
    s = settings_from_args(args)
    if args.action == "up":
        r = step(s, assume_yes=args.yes, timeout_s=args.timeout)
    elif args.action == "status":
        r = status(s)
    else:
        r = teardown(s, assume_yes=args.yes)
    r.show()
    return 0 if r.ok else 1


__all__ = ["step", "status", "job_server", "teardown", "worker_pods", "infra_criteria", "crash_looping", "check_raycluster", "check_rayjob", "render_raycluster",
           "render_rayjob", "render_operator", "raycluster_values", "head_size", "worker_size", "KubeRayResult",
           "preflight", "install_operator", "head_pod", "NCCL_SOCKET_IFNAME", "TRAIN_SLOT"]
