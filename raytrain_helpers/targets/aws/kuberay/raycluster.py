"""Step 04 on aws: the KubeRay operator and the RayCluster (and the job server that notebook 05 submits to).

Install the KubeRay operator with Helm (:mod:`.operator`: ray-project's chart ``kuberay-operator`` pinned to
KUBERAY_VERSION, with its RBAC and CRDs) on the system node, create the
namespace, check the rendered RayCluster (:func:`~raytrain_helpers.plan.raycluster.check_raycluster`) and the
nodes' allocatable (:func:`.kuberay_pods.preflight`), apply it with server-side apply, and wait for the head to be
Ready and every worker Running, showing each pod's events on the way (:mod:`.podwait`: the first start pulls the
multi-GB DLC on every node, about 30 min, hence the 45 min default). A re-run waits on the pods already there;
nothing is recreated while the spec is the same. 06's infrastructure rows are in :mod:`..jobs.rows`; every
name of those three modules is importable from here too.
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ....clients import kubernetes as kube
from ....core.config import Settings
from ....core.constants import DASHBOARD_PORT
from ....plan.kube_objects import (
    PART_OF,
    PART_OF_LABEL,
    is_part_of_tutorial,
    name_of,
    namespace_of,
    phase_of,
    pod_problem,
    pod_ready,
)
from ....plan.probes import probe_problems
from ....plan.raycluster import (
    AUTH_TOKEN_KEY,
    NETWORK_POLICIES,
    RAY_API,
    auth_secret_name,
    render_namespace,
    render_network_policies,
    render_raycluster,
    spec_diff,
)
from ....plan.raycluster_checks import check_raycluster
from ...base import KubeRayResult
from ..plugins import prepull as image_prepull
from ..storage import state as storage_state
from .operator import (
    CRD_API,
    RAYCLUSTER_CRD,
    deployment_ready,
    diagnose_operator,
    find_operator,
    install_operator,
    is_tutorial_release,
    operator_version,
    uninstall_operator,
)
from .pods import (
    NodeUse,
    cluster_pods,
    cluster_selector,
    diagnose_cluster,
    placement,
    pod_requests,
    pod_role,
    preflight,
)
from .podwait import CRASH_RESTARTS, HOPELESS_WAITING, PodProgress, crash_looping

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
    foreign = _not_the_tutorials(run)
    if foreign:
        return run.failed(
            "objects of the tutorial's names exist and are not the tutorial's; nothing was applied", problems=foreign
        )
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
    if kube.get(run.client, "v1", "Namespace", run.settings.kubernetes.namespace) is None:
        kube.apply(run.client, render_namespace(run.settings))  # a workshop's namespace is the facilitator's: kept
    for policy in render_network_policies(run.settings):  # before any pod: default-deny ingress, then the allow
        kube.apply(run.client, policy)
    kube.apply(run.client, storage_state.service_account(run.settings))  # the pods' identity (checkpoint storage)
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


def _not_the_tutorials(run: _Rollout) -> list[str]:
    """The objects 04 would apply over (the RayCluster, its ServiceAccount, the NetworkPolicies) that exist without
    the tutorial's label: each a line saying it is left as it is, with the fix. Applying over them would change
    someone else's objects."""
    s = run.settings
    ns = s.kubernetes.namespace
    mine = [run.obj, storage_state.service_account(s), *render_network_policies(s)]
    out = []
    for obj in mine:
        kind, name = obj["kind"], obj["metadata"]["name"]
        found = kube.get(run.client, obj["apiVersion"], kind, name, ns)
        if found is not None and not is_part_of_tutorial(found):
            out.append(
                f"{kind} {ns}/{name}: left as it is - not created by the tutorial (no label {PART_OF_LABEL}="
                f"{PART_OF}); the tutorial never changes or deletes it. Fix: choose another kubernetes.namespace "
                f"(or kubernetes.ray_cluster_name / service_account), or remove it if it is yours to remove"
            )
    return out


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
    if operator is not None and operator_version(operator) != want_tag and not is_tutorial_release(operator):
        raise kube.K8sError(
            f"a KubeRay operator the tutorial did not install runs in the cluster ({namespace_of(operator)}/"
            f"{name_of(operator)}, {operator_version(operator) or 'no tag'}); a second operator would reconcile "
            f"the same RayClusters, and the tutorial never changes that one. Fix: set versions.kuberay_version: "
            f"{operator_version(operator).lstrip('v')} to use it, or upgrade it to {want_tag} yourself"
        )
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
        try:  # each GPU node's pull time into the run's folder; the pre-pull DaemonSet is no longer needed
            image_prepull.finish(run.client, run.settings, pods, log=run.log)
        except kube.K8sError as e:
            run.log(f"image pull times not recorded: {e}")
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
    token = cluster_token(settings)
    with kube.port_forward(settings, name_of(head), DASHBOARD_PORT, connection_factory=connection_factory) as fwd:
        with _token_in_environment(token):
            yield fwd.url


def cluster_token(settings: Settings, client=None) -> str:
    """The RayCluster's Ray token, read from the Secret the KubeRay operator created for it (``authOptions.mode:
    token``); a K8sError naming the Secret when it is not there."""
    k = settings.kubernetes
    name = auth_secret_name(k.ray_cluster_name)
    with kube.using_client(settings, client) as api:
        secret = kube.get(api, "v1", "Secret", name, k.namespace)
    raw = ((secret or {}).get("data") or {}).get(AUTH_TOKEN_KEY)
    if not raw:
        raise kube.K8sError(
            f"no Ray token: Secret {k.namespace}/{name} (key {AUTH_TOKEN_KEY}) "
            + ("lacks the key" if secret else "does not exist")
            + ". The KubeRay operator creates it for a RayCluster with authOptions.mode token. Fix: run notebook 04 "
            "(kuberay.step) again; `kubectl get raycluster -n " + k.namespace + " -o yaml` shows the spec"
        )
    return base64.b64decode(raw).decode().strip()


@contextlib.contextmanager
def _token_in_environment(token: str) -> Iterator[None]:
    """``RAY_AUTH_TOKEN`` for this process while the port-forward is open: the Jobs client
    (:func:`raytrain_helpers.clients.rayjobs.auth_headers`) sends it as ``Authorization: Bearer``; restored on
    exit."""
    before = os.environ.get("RAY_AUTH_TOKEN")
    os.environ["RAY_AUTH_TOKEN"] = token
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAY_AUTH_TOKEN", None)
        else:
            os.environ["RAY_AUTH_TOKEN"] = before


# ============================================================================================
# Teardown
# ============================================================================================


def _delete_everything(client, settings: Settings, *, timeout_s: float, poll_s: float, log) -> dict[str, str]:
    """RayJob and RayCluster (waiting for their pods), the operator's Helm release, then the namespace: each only
    when it is the tutorial's (its label, its release label). Returns what was kept, by row, with the reason."""
    namespace, name = settings.kubernetes.namespace, settings.kubernetes.ray_cluster_name
    kept: dict[str, str] = {}
    why = f"kept: not the tutorial's (no label {PART_OF_LABEL}={PART_OF})"
    for kind, obj_name in (("RayJob", f"{name}-job"), ("RayCluster", name)):
        found = kube.get(client, RAY_API, kind, obj_name, namespace)
        if is_part_of_tutorial(found):
            kube.delete(client, RAY_API, kind, obj_name, namespace)
        elif found is not None:
            kept[f"{kind} {namespace}/{obj_name}"] = why
            log(f"{kind} {namespace}/{obj_name}: {why}")
    if f"RayCluster {namespace}/{name}" not in kept:
        kube.wait_for(lambda: (not cluster_pods(client, settings), None), timeout_s=timeout_s, interval_s=poll_s)
    account = settings.kubernetes.service_account
    if is_part_of_tutorial(kube.get(client, "v1", "ServiceAccount", account, namespace)):
        kube.delete(client, "v1", "ServiceAccount", account, namespace)
    for policy in NETWORK_POLICIES:
        if is_part_of_tutorial(kube.get(client, "networking.k8s.io/v1", "NetworkPolicy", policy, namespace)):
            kube.delete(client, "networking.k8s.io/v1", "NetworkPolicy", policy, namespace)
    image_prepull.stop(client, settings)
    operator = find_operator(client)
    if not uninstall_operator(client, log, settings) and operator is not None:
        where = f"{namespace_of(operator)}/{name_of(operator)}"
        kept["KubeRay operator Deployment"] = f"kept: {where} is not the tutorial's Helm release"
    ns = kube.get(client, "v1", "Namespace", namespace)
    if is_part_of_tutorial(ns):
        kube.delete(client, "v1", "Namespace", namespace)
    elif ns is not None:
        kept[f"Namespace {namespace}"] = why
        log(f"Namespace {namespace}: {why}")
    return kept


def _still_present(client, settings: Settings, kept: dict[str, str]) -> tuple[bool, list[tuple[str, str]]]:
    namespace, name = settings.kubernetes.namespace, settings.kubernetes.ray_cluster_name
    left = []
    if f"RayCluster {namespace}/{name}" not in kept:
        if kube.get(client, RAY_API, "RayCluster", name, namespace) is not None:
            left.append((f"RayCluster {namespace}/{name}", "STILL PRESENT"))
        if cluster_pods(client, settings):
            left.append((f"pods ray.io/cluster={name}", "STILL PRESENT"))
    if "KubeRay operator Deployment" not in kept and is_tutorial_release(find_operator(client)):
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
    """Delete the RayCluster (and the RayJob), then the operator; verified by listing. Never prompts. What is not
    the tutorial's is kept, and its row says so."""
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
            kept = _delete_everything(api, settings, timeout_s=timeout_s, poll_s=poll_s, log=log)
            waited = kube.wait_for(lambda: _still_present(api, settings, kept), timeout_s=timeout_s, interval_s=poll_s)
        except kube.K8sError as e:
            return KubeRayResult("aws", "teardown", False, str(e), elapsed_s=time.monotonic() - t0)
    cluster_kept = kept.get(f"RayCluster {namespace}/{name}")
    rows = [
        (f"RayCluster {namespace}/{name}", cluster_kept or "absent"),
        (f"pods ray.io/cluster={name}", cluster_kept or "absent"),
        ("KubeRay operator Deployment", kept.get("KubeRay operator Deployment", "absent")),
        (f"Namespace {namespace}", kept.get(f"Namespace {namespace}", "absent")),
    ]
    if not waited.ok and isinstance(waited.value, list):
        left = dict(waited.value)
        rows = [(obj, left.get(obj, state)) for obj, state in rows]
    return KubeRayResult(
        "aws",
        "teardown",
        waited.ok,
        ("RayCluster and operator deleted" if not kept else "the tutorial's objects deleted; others kept")
        if waited.ok
        else "some objects are still there",
        deleted=rows,
        elapsed_s=time.monotonic() - t0,
    )


__all__ = [
    "CRASH_RESTARTS",
    "HOPELESS_WAITING",
    "NodeUse",
    "cluster_pods",
    "cluster_selector",
    "crash_looping",
    "deployment_ready",
    "diagnose_cluster",
    "diagnose_operator",
    "find_operator",
    "head_pod",
    "is_tutorial_release",
    "install_operator",
    "cluster_token",
    "job_server",
    "operator_version",
    "placement",
    "pod_requests",
    "pod_role",
    "preflight",
    "raycluster",
    "status",
    "teardown",
    "worker_pods",
]
