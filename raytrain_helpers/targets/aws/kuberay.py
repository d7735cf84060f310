"""Step 04 on aws: the KubeRay operator and the RayCluster (and the job server that notebook 05 submits to).

Install the KubeRay operator (Helm chart ``kuberay-operator`` pinned to KUBERAY_VERSION when ``helm`` is on
PATH, else the rendered manifests plus the release's CRDs) on the system node, create the namespace, check the
rendered RayCluster (:func:`~raytrain_helpers.plan.raycluster.check_raycluster`) and the nodes' allocatable,
apply it with server-side apply, and wait for the head to be Ready and every worker Running, showing each pod's
events on the way (:mod:`.podwait`: the first start pulls the multi-GB DLC on every node, about 30 min, hence the
45 min default). A re-run waits on the pods already there; nothing is recreated while the spec is the same.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...clients import helm
from ...clients import kubernetes as kube
from ...core.config import Settings
from ...core.constants import DASHBOARD_PORT
from ...core.paths import REPO_ROOT
from ...plan.kube_objects import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    PART_OF,
    PART_OF_LABEL,
    container_of,
    is_part_of_tutorial,
    labels,
    match_labels_selector,
    name_of,
    namespace_of,
    node_row,
    phase_of,
    pod_problem,
    pod_ready,
    pod_template_spec,
    quantity,
    selector_misses,
    untolerated_taint_texts,
)
from ...plan.probes import probe_problems
from ...plan.raycluster import (
    KUBERAY_HELM_REPO,
    OPERATOR_NAMESPACE,
    OPERATOR_RELEASE,
    OPERATOR_REQUESTS,
    RAY_API,
    check_raycluster,
    group_pod_spec,
    render_namespace,
    render_operator,
    render_raycluster,
    spec_diff,
)
from ..base import KubeRayResult
from . import efa_tools, storage
from .podwait import CRASH_RESTARTS, HOPELESS_WAITING, PodProgress, crash_looping

CRD_API = "apiextensions.k8s.io/v1"
RAYCLUSTER_CRD = "rayclusters.ray.io"
#: 06_verify's infrastructure rows on aws (the names the verification table shows).
INFRA_GPU = "GPUs allocatable on every GPU node"
INFRA_EFA = "EFA allocatable on every GPU node"
#: fi_info -p efa -t FI_EP_RDM: the efa provider offers a reliable-datagram (RDM) endpoint, which aws-ofi-nccl needs
#: (libfabric fi_efa(7), https://manpages.ubuntu.com/manpages/noble/man7/fi_efa.7.html, checked 2026-12-04)
INFRA_FI = "EFA provider with an RDM endpoint (fi_info -p efa)"
INFRA_PODS = "head Ready + workers Running"
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
# The operator
# ============================================================================================


def find_operator(client) -> dict | None:
    """The KubeRay operator Deployment (any namespace), or None."""
    deps = kube.list_objects(
        client, "apps/v1", "Deployment", None, label_selector="app.kubernetes.io/name=kuberay-operator"
    )
    return deps[0] if deps else None


def crd_dir(settings: Settings) -> Path | None:
    """Where the release's CRD files are: RAYTRAIN_KUBERAY_CRDS, or <repo>/../shared/kuberay-crds/v<version>."""
    env = os.environ.get("RAYTRAIN_KUBERAY_CRDS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "kuberay-crds" / f"v{settings.versions.kuberay_version}")
    for folder in candidates:
        if folder.is_dir() and any(folder.glob("ray.io_*.yaml")):
            return folder
    return None


def install_crds(client, settings: Settings, *, log=print) -> None:
    """Apply the release's CRD files unless the RayCluster CRD is there already."""
    version = settings.versions.kuberay_version
    if kube.get(client, CRD_API, "CustomResourceDefinition", RAYCLUSTER_CRD) is not None:
        return
    folder = crd_dir(settings)
    if folder is None:
        raise kube.K8sError(
            f"the KubeRay CRDs are not installed and neither helm nor the CRD files of v{version} are here. Fix: "
            f"install helm (the reference path), or set RAYTRAIN_KUBERAY_CRDS to a folder with "
            f"ray.io_rayclusters.yaml/ray.io_rayjobs.yaml of v{version}, or run `kubectl apply --server-side -k "
            f'"github.com/ray-project/kuberay/ray-operator/config/crd?ref=v{version}"`'
        )
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for path in sorted(folder.glob("ray.io_*.yaml")):
        for crd in (x for x in yaml.load_all(path.read_text(), Loader=loader) if x):
            crd.setdefault("metadata", {}).setdefault("labels", {})[PART_OF_LABEL] = PART_OF
            kube.apply(client, crd)
    log(f"applied the KubeRay v{version} CRDs from {folder}")


def install_operator(client, settings: Settings, *, log=print) -> str:
    """Install (or upgrade to) the pinned operator; returns how. Idempotent."""
    version = settings.versions.kuberay_version
    if helm.executable():
        helm.upgrade_install(
            client,
            release=OPERATOR_RELEASE,
            chart="kuberay-operator",
            repo=KUBERAY_HELM_REPO,
            version=version,
            namespace=OPERATOR_NAMESPACE,
            values={"nodeSelector": {"role": "system"}},
            create_namespace=True,
        )
        log(f"helm: kuberay-operator {version} installed in {OPERATOR_NAMESPACE}")
        return f"helm chart kuberay-operator {version}"
    install_crds(client, settings, log=log)
    for obj in render_operator(settings):
        kube.apply(client, obj)
    log(f"applied the KubeRay operator v{version} manifests ({OPERATOR_NAMESPACE})")
    return f"rendered manifests (operator v{version})"


def deployment_ready(dep: dict | None) -> bool:
    status = (dep or {}).get("status") or {}
    return bool(dep) and (status.get("readyReplicas") or 0) >= max(1, (dep.get("spec") or {}).get("replicas", 1) or 1)


def operator_version(dep: dict | None) -> str:
    """The operator image's tag (``v1.7.0``)."""
    image = container_of(pod_template_spec(dep or {})).get("image") or ""
    return image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""


def diagnose_operator(client, dep: dict | None) -> list[str]:
    if dep is None:
        return ["the KubeRay operator Deployment was not found after the install"]
    status = dep.get("status") or {}
    out = [
        f"the KubeRay operator Deployment {name_of(dep)} is not Ready (ready {status.get('readyReplicas') or 0}"
        f"/{(dep.get('spec') or {}).get('replicas', 1)}, image tag {operator_version(dep) or '?'})"
    ]
    selector = match_labels_selector(dep)
    for pod in kube.list_objects(client, "v1", "Pod", namespace_of(dep), label_selector=selector):
        out.append(f"operator pod {name_of(pod)}: {pod_problem(pod) or 'no problem reported'}")
    return out


# ============================================================================================
# Step 04 on aws
# ============================================================================================


@dataclass
class _Rollout:
    """One run of :func:`raycluster`: its client, settings, the rendered object and the time budget."""

    client: Any
    settings: Settings
    obj: dict
    assume_yes: bool
    timeout_s: float
    poll_s: float
    log: Callable[[str], Any]
    t0: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.t0

    @property
    def where(self) -> str:
        return f"{self.settings.kubernetes.namespace}/{self.settings.kubernetes.ray_cluster_name}"

    def failed(self, message: str, **details: Any) -> KubeRayResult:
        return KubeRayResult("aws", "up", False, message, elapsed_s=self.elapsed_s, **details)

    def live_raycluster(self) -> dict | None:
        k = self.settings.kubernetes
        return kube.get(self.client, RAY_API, "RayCluster", k.ray_cluster_name, k.namespace)


def raycluster(
    settings: Settings,
    *,
    assume_yes: bool = False,
    timeout_s: float = 2700,
    poll_s: float = 5.0,
    client=None,
    log=print,
) -> KubeRayResult:
    """Notebook 04 on aws: the operator installed and ready, the RayCluster applied, its pods placed and Ready.

    A RayCluster that exists with another spec is replaced only with ``assume_yes``."""
    t0 = time.monotonic()
    obj = render_raycluster(settings)
    problems = check_raycluster(obj, settings) + probe_problems(obj.get("spec") or {}, settings)
    if problems:
        return KubeRayResult(
            "aws", "up", False, "the rendered RayCluster failed its checks; nothing was applied", problems=problems
        )
    with kube.using_client(settings, client) as api:
        run = _Rollout(api, settings, obj, assume_yes, timeout_s, poll_s, log, t0)
        try:
            return _roll_out(run)
        except kube.K8sError as e:
            return run.failed(str(e))


def _roll_out(run: _Rollout) -> KubeRayResult:
    operator = find_operator(run.client)
    problems = preflight(run.client, run.settings, run.obj, operator_present=operator is not None)
    if problems:
        return run.failed("the nodes cannot host the RayCluster; nothing was applied", problems=problems)
    refused = _replace_changed_cluster(run)
    if refused is not None:
        return refused
    method = _ensure_operator(run, operator)
    waited = _wait_for_operator(run)
    if not waited.ok:
        dep = waited.value if isinstance(waited.value, dict) else None
        return run.failed(
            "KubeRay operator not ready", diagnosis=diagnose_operator(run.client, dep), install_method=method
        )
    kube.apply(run.client, render_namespace(run.settings))
    kube.apply(run.client, storage.service_account(run.settings))  # the pods' identity (checkpoint storage)
    events = PodProgress(run.client, run.settings.kubernetes.namespace, run.log, pod_role, lambda: run.elapsed_s)
    events.remember(cluster_pods(run.client, run.settings))  # a re-run: the events shown before are summarised
    kube.apply(run.client, run.obj)
    run.log(f"applied RayCluster {run.where} (server-side apply, field manager {kube.FIELD_MANAGER})")
    # a plugin can disappear between notebook 03 and now: fail fast rather than wait on Pending pods
    problems = preflight(run.client, run.settings, run.obj, operator_present=True)
    if problems:
        return run.failed(
            "the nodes can no longer host the RayCluster (checked after apply)",
            problems=problems,
            install_method=method,
        )
    return _wait_for_pods(run, method, events)


def _replace_changed_cluster(run: _Rollout) -> KubeRayResult | None:
    """A RayCluster with another spec: refused without ``assume_yes``, else deleted (and waited for)."""
    existing = run.live_raycluster()
    if existing is None:
        return None
    diff = spec_diff(run.obj["spec"], existing.get("spec") or {})
    if not diff:
        return None
    if not run.assume_yes:
        return run.failed(
            f"RayCluster {run.where} exists with a different spec ({', '.join(diff[:5])}"
            f"{'...' if len(diff) > 5 else ''}); KubeRay does not restart running pods for it",
            problems=[
                "Fix: step(settings, assume_yes=True) deletes and recreates it, or "
                "kuberay.teardown(settings, assume_yes=True) first"
            ],
        )
    k = run.settings.kubernetes
    run.log(f"deleting RayCluster {run.where} (its spec changed: {', '.join(diff[:3])})")
    kube.delete(run.client, RAY_API, "RayCluster", k.ray_cluster_name, k.namespace)
    gone = kube.wait_for(
        lambda: (run.live_raycluster() is None and not cluster_pods(run.client, run.settings), None),
        timeout_s=min(300, run.timeout_s),
        interval_s=run.poll_s,
    )
    return None if gone.ok else run.failed(f"the old RayCluster {run.where} did not go away")


def _ensure_operator(run: _Rollout, operator: dict | None) -> str:
    """Install the pinned operator unless it runs already; returns how it got there."""
    want_tag = f"v{run.settings.versions.kuberay_version}"
    if operator is None or operator_version(operator) != want_tag:
        return install_operator(run.client, run.settings, log=run.log)
    return f"already installed ({name_of(operator)} {want_tag} in {namespace_of(operator)})"


def _wait_for_operator(run: _Rollout) -> kube.WaitResult:
    want_tag = f"v{run.settings.versions.kuberay_version}"

    def operator_ready():
        dep = find_operator(run.client)
        crd = kube.get(run.client, CRD_API, "CustomResourceDefinition", RAYCLUSTER_CRD)
        return deployment_ready(dep) and operator_version(dep) == want_tag and crd is not None, dep

    budget = max(1.0, min(300, run.timeout_s - run.elapsed_s))
    return kube.wait_for(operator_ready, timeout_s=budget, interval_s=run.poll_s)


def _wait_for_pods(run: _Rollout, method: str, events: PodProgress) -> KubeRayResult:
    """Wait for the head to be Ready and every worker Running; stop early when a pod is crash-looping."""
    count = run.settings.aws.gpu_node_count
    last = [""]
    stuck: list[str] = []

    def probe():
        pods = cluster_pods(run.client, run.settings)
        events.update(pods)  # Scheduled, Pulling, Pulled, Created, Started: once each
        heads = [p for p in pods if pod_role(p) == "head"]
        running = [p for p in pods if pod_role(p) == "worker" and phase_of(p) == "Running"]
        ready = bool(heads) and all(pod_ready(h) for h in heads)
        line = f"head {'Ready' if ready else 'not ready'}, workers Running {len(running)}/{count}"
        if line != last[0]:
            run.log(f"  [{run.elapsed_s:5.0f}s] {line}")
            last[0] = line
        if ready and len(running) >= count:
            return True, pods
        stuck[:] = [f"{pod_role(p)} pod {name_of(p)}: {why}" for p in pods if (why := crash_looping(p))]
        return bool(stuck), pods

    waited = kube.wait_for(probe, timeout_s=max(1.0, run.timeout_s - run.elapsed_s), interval_s=run.poll_s)
    ok = waited.ok and not stuck
    pods = waited.value if isinstance(waited.value, list) else cluster_pods(run.client, run.settings)
    nodes = kube.list_objects(run.client, "v1", "Node")
    live = run.live_raycluster() or {}
    elapsed = run.elapsed_s
    if ok:
        message = f"RayCluster {run.where} ready"
    elif stuck:
        message = f"RayCluster {run.where} not ready after {elapsed:.0f} s: stopped waiting, a pod is crash-looping"
    else:
        message = f"RayCluster {run.where} not ready after {run.timeout_s:g} s (run again: it waits on the same pods)"
    result = KubeRayResult(
        "aws",
        "up",
        ok,
        message,
        pods=placement(pods, nodes),
        install_method=method,
        state=str((live.get("status") or {}).get("state", "")),
        elapsed_s=elapsed,
    )
    if not ok:
        result.diagnosis = stuck + diagnose_cluster(run.client, run.settings, pods, nodes, live)
    return result


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


# ============================================================================================
# Status, pods, job server
# ============================================================================================


def _pods_ready(pods: list[dict], workers_needed: int) -> bool:
    heads = [p for p in pods if pod_role(p) == "head"]
    running = sum(1 for p in pods if pod_role(p) == "worker" and phase_of(p) == "Running")
    return bool(heads) and all(pod_ready(h) for h in heads) and running >= workers_needed


def status(settings: Settings, *, client=None) -> KubeRayResult:
    """The RayCluster's state and pod placement, and whether the operator is ready."""
    with kube.using_client(settings, client) as api:
        try:
            k = settings.kubernetes
            rc = kube.get(api, RAY_API, "RayCluster", k.ray_cluster_name, k.namespace)
            pods = cluster_pods(api, settings)
            nodes = kube.list_objects(api, "v1", "Node")
            operator = find_operator(api)
        except kube.K8sError as e:
            return KubeRayResult("aws", "status", False, str(e))
    state = str(((rc or {}).get("status") or {}).get("state", "")) if rc else "absent"
    if operator is None:
        method = "operator absent"
    else:
        method = f"operator {name_of(operator)} ready" if deployment_ready(operator) else "operator not ready"
    ok = rc is not None and _pods_ready(pods, settings.aws.gpu_node_count)
    return KubeRayResult(
        "aws",
        "status",
        ok,
        f"RayCluster {k.namespace}/{k.ray_cluster_name}",
        pods=placement(pods, nodes),
        state=state,
        install_method=method,
    )


def head_pod(settings: Settings, client=None) -> dict | None:
    """The RayCluster's head pod (a Ready one first), or None."""
    with kube.using_client(settings, client) as api:
        heads = [p for p in cluster_pods(api, settings) if pod_role(p) == "head"]
    heads.sort(key=lambda p: (not pod_ready(p), name_of(p)))
    return heads[0] if heads else None


def worker_pods(settings: Settings, *, client=None, running_only: bool = True) -> list[str]:
    """Names of the RayCluster's worker pods (sorted), by default only those Running (exec needs it)."""
    with kube.using_client(settings, client) as api:
        pods = [p for p in cluster_pods(api, settings) if pod_role(p) == "worker"]
    if running_only:
        pods = [p for p in pods if phase_of(p) == "Running"]
    return sorted(name_of(p) for p in pods)


@contextlib.contextmanager
def job_server(settings: Settings, *, connection_factory=None) -> Iterator[str]:
    """The Ray Jobs API address: a 127.0.0.1 port-forward to the head's dashboard port, closed on exit."""
    head = head_pod(settings)
    if head is None:
        raise kube.K8sError(
            f"no Ray head pod for RayCluster {settings.kubernetes.namespace}/"
            f"{settings.kubernetes.ray_cluster_name}. Fix: run notebook 04 (kuberay.step)"
        )
    if not pod_ready(head):
        raise kube.K8sError(f"the Ray head pod {name_of(head)} is not Ready: {pod_problem(head)}")
    with kube.port_forward(settings, name_of(head), DASHBOARD_PORT, connection_factory=connection_factory) as fwd:
        yield fwd.url


# ============================================================================================
# 06's infrastructure rows
# ============================================================================================


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


def _too_few_nodes(nodes: list[dict], settings: Settings) -> str:
    count = settings.aws.gpu_node_count
    return f"; only {len(nodes)} role=gpu-worker node(s), GPU_NODE_COUNT = {count}" if len(nodes) < count else ""


def gpu_row(nodes: list[dict], settings: Settings) -> tuple[str, bool, str]:
    """Every GPU node advertises GPUS_PER_NODE ``nvidia.com/gpu``."""
    want, few = settings.aws.gpus_per_node, _too_few_nodes(nodes, settings)
    bad = [f"{r['name']}={r['gpus']}" for r in nodes if r["gpus"] != want]
    if bad:
        evidence = f"nvidia.com/gpu: {', '.join(bad)} (GPUS_PER_NODE {want})"
    elif nodes:
        evidence = f"{len(nodes)} GPU node(s) advertise nvidia.com/gpu={want}"
    else:
        evidence = "no node labelled role=gpu-worker"
    return INFRA_GPU, bool(nodes) and not bad and not few, evidence + few


def efa_row(nodes: list[dict], settings: Settings) -> tuple[str, bool, str]:
    """Every GPU node advertises at least one ``vpc.amazonaws.com/efa``."""
    few = _too_few_nodes(nodes, settings)
    bad = [f"{r['name']}={r['efa']}" for r in nodes if r["efa"] < 1]
    if bad:
        evidence = f"vpc.amazonaws.com/efa: {', '.join(bad)}"
    elif nodes:
        counts = ", ".join(str(r["efa"]) for r in nodes)
        evidence = f"{len(nodes)} GPU node(s) advertise vpc.amazonaws.com/efa >= 1 ({counts})"
    else:
        evidence = "no node labelled role=gpu-worker"
    return INFRA_EFA, bool(nodes) and not bad and not few, evidence + few


def _fi_info_in(client, settings: Settings, pod: str) -> tuple[bool, str]:
    try:
        return fi_info_efa(kube.exec_in_pod(settings, pod, efa_tools.fi_info_command(), client=client, timeout_s=60))
    except kube.ExecError as e:
        text = (e.stderr or e.stdout or "").strip()
        return False, f"exit {e.returncode}: " + (text.splitlines()[-1] if text else str(e))
    except kube.K8sError as e:
        return False, str(e)


def fi_info_row(client, settings: Settings, running: list[dict]) -> tuple[str, bool, str]:
    """``fi_info -p efa`` in every Running worker pod finds the efa provider with an RDM endpoint."""
    if not running:
        return INFRA_FI, False, "no Running worker pod to run fi_info in. Fix: run notebook 04"
    seen, fails = [], []
    for pod in running:
        ok, evidence = _fi_info_in(client, settings, name_of(pod))
        (seen if ok else fails).append((name_of(pod), evidence))
    if not fails:
        return INFRA_FI, True, f"{len(seen)}/{len(running)} worker pod(s): {seen[0][1]}"
    return (
        INFRA_FI,
        False,
        "; ".join(f"{n}: {e}" for n, e in fails[:3])
        + (
            ". Fix: the pods need a vpc.amazonaws.com/efa request on EFA-enabled nodes (notebook 03, efaEnabled in the "
            "GPU node group)"
        ),
    )


def pods_row(pods: list[dict], settings: Settings) -> tuple[str, bool, str]:
    """The head Ready and GPU_NODE_COUNT workers Running."""
    count = settings.aws.gpu_node_count
    workers = sorted((p for p in pods if pod_role(p) == "worker"), key=name_of)
    running = [p for p in workers if phase_of(p) == "Running"]
    heads = [p for p in pods if pod_role(p) == "head"]
    ready = bool(heads) and all(pod_ready(h) for h in heads)
    evidence = (
        f"head {'Ready' if ready else 'not Ready' if heads else 'missing'}, workers Running {len(running)}/{count}"
    )
    if workers and len(running) < len(workers):
        waiting = ", ".join(
            f"{name_of(p)} {(p.get('status') or {}).get('phase', '?')}" for p in workers if p not in running
        )
        evidence += f" ({waiting[:200]})"
    return INFRA_PODS, ready and len(running) >= count, evidence


def infra_criteria(settings: Settings, *, client=None) -> list[tuple[str, bool, str]]:
    """06_verify's aws infrastructure rows, from the Kubernetes side: allocatable GPUs and EFA on every
    ``role=gpu-worker`` node, ``fi_info -p efa`` in the worker pods, the head Ready and the workers Running.
    Returns ``[(name, ok, evidence)]``; an unreachable API fails every row with the reason."""
    try:
        with kube.using_client(settings, client) as api:
            nodes = [node_row(n) for n in kube.list_objects(api, "v1", "Node") if labels(n).get("role") == "gpu-worker"]
            pods = cluster_pods(api, settings)
            running = sorted((p for p in pods if pod_role(p) == "worker" and phase_of(p) == "Running"), key=name_of)
            fi_info = fi_info_row(api, settings, running)
    except kube.K8sError as e:
        return [(name, False, f"Kubernetes API: {e}") for name in (INFRA_GPU, INFRA_EFA, INFRA_FI, INFRA_PODS)]
    return [gpu_row(nodes, settings), efa_row(nodes, settings), fi_info, pods_row(pods, settings)]


# ============================================================================================
# Teardown
# ============================================================================================


def _uninstall_operator(client, log) -> None:
    operator = find_operator(client)
    if operator is None:
        return
    managed = labels(operator).get("app.kubernetes.io/managed-by")
    if managed == "Helm" and helm.executable():
        namespace = namespace_of(operator) or OPERATOR_NAMESPACE
        helm.uninstall(client, OPERATOR_RELEASE, namespace)
        log(f"helm uninstall {OPERATOR_RELEASE} -n {namespace}")
    elif managed == "Helm":
        log("the operator was installed with Helm but helm is not on PATH: deleting its objects")


def _delete_everything(client, settings: Settings, *, timeout_s: float, poll_s: float, log) -> None:
    """RayJob and RayCluster (waiting for their pods), the operator, its CRDs, then the namespace if ours."""
    namespace, name = settings.kubernetes.namespace, settings.kubernetes.ray_cluster_name
    kube.delete(client, RAY_API, "RayJob", f"{name}-job", namespace)
    kube.delete(client, RAY_API, "RayCluster", name, namespace)
    kube.wait_for(lambda: (not cluster_pods(client, settings), None), timeout_s=timeout_s, interval_s=poll_s)
    account = settings.kubernetes.service_account
    if is_part_of_tutorial(kube.get(client, "v1", "ServiceAccount", account, namespace)):
        kube.delete(client, "v1", "ServiceAccount", account, namespace)
    _uninstall_operator(client, log)
    for obj in reversed(render_operator(settings)):
        kube.delete(client, obj["apiVersion"], obj["kind"], name_of(obj), namespace_of(obj))
    for crd in kube.list_objects(
        client, CRD_API, "CustomResourceDefinition", label_selector=f"{PART_OF_LABEL}={PART_OF}"
    ):
        kube.delete(client, CRD_API, "CustomResourceDefinition", name_of(crd))
    if is_part_of_tutorial(kube.get(client, "v1", "Namespace", namespace)):
        kube.delete(client, "v1", "Namespace", namespace)


def _still_present(client, settings: Settings) -> tuple[bool, list[tuple[str, str]]]:
    namespace, name = settings.kubernetes.namespace, settings.kubernetes.ray_cluster_name
    left = []
    if kube.get(client, RAY_API, "RayCluster", name, namespace) is not None:
        left.append(("RayCluster " + name, "STILL PRESENT"))
    if cluster_pods(client, settings):
        left.append((f"pods ray.io/cluster={name}", "STILL PRESENT"))
    if find_operator(client) is not None:
        left.append(("KubeRay operator Deployment", "STILL PRESENT"))
    if is_part_of_tutorial(kube.get(client, "v1", "Namespace", namespace)):
        left.append((f"Namespace {namespace}", "STILL PRESENT"))
    return not left, left


def teardown(
    settings: Settings,
    assume_yes: bool = False,
    *,
    timeout_s: float = 300,
    poll_s: float = 5.0,
    client=None,
    log=print,
) -> KubeRayResult:
    """Delete the RayCluster (and the RayJob), then the operator; verified by listing. Never prompts."""
    namespace, name = settings.kubernetes.namespace, settings.kubernetes.ray_cluster_name
    if not assume_yes:
        return KubeRayResult(
            "aws",
            "teardown",
            False,
            f"refused: this deletes RayCluster {namespace}/{name} and the KubeRay operator. Fix: "
            f"teardown(settings, assume_yes=True)",
        )
    with kube.using_client(settings, client) as api:
        t0 = time.monotonic()
        try:
            _delete_everything(api, settings, timeout_s=timeout_s, poll_s=poll_s, log=log)
            waited = kube.wait_for(lambda: _still_present(api, settings), timeout_s=timeout_s, interval_s=poll_s)
        except kube.K8sError as e:
            return KubeRayResult("aws", "teardown", False, str(e), elapsed_s=time.monotonic() - t0)
    rows = [
        (f"RayCluster {namespace}/{name}", "absent"),
        (f"pods ray.io/cluster={name}", "absent"),
        ("KubeRay operator Deployment", "absent"),
        (f"Namespace {namespace}", "absent"),
    ]
    if not waited.ok and isinstance(waited.value, list):
        left = dict(waited.value)
        rows = [(obj, left.get(obj, state)) for obj, state in rows]
    return KubeRayResult(
        "aws",
        "teardown",
        waited.ok,
        "RayCluster and operator deleted" if waited.ok else "some objects are still there",
        deleted=rows,
        elapsed_s=time.monotonic() - t0,
    )


__all__ = [
    "CRASH_RESTARTS",
    "HOPELESS_WAITING",
    "INFRA_EFA",
    "INFRA_FI",
    "INFRA_GPU",
    "INFRA_PODS",
    "NodeUse",
    "cluster_pods",
    "cluster_selector",
    "crash_looping",
    "crd_dir",
    "deployment_ready",
    "diagnose_cluster",
    "diagnose_operator",
    "efa_row",
    "fi_info_efa",
    "fi_info_row",
    "find_operator",
    "gpu_row",
    "head_pod",
    "infra_criteria",
    "install_crds",
    "install_operator",
    "job_server",
    "operator_version",
    "placement",
    "pod_requests",
    "pod_role",
    "pods_row",
    "preflight",
    "raycluster",
    "status",
    "teardown",
    "worker_pods",
]
