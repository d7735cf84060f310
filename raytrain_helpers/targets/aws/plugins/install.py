"""Step 03 on aws: the device plugins that make GPUs and EFA schedulable.

Install the NVIDIA device plugin (NVIDIA_DEVICE_PLUGIN_VERSION) and the AWS EFA device plugin
(EFA_DEVICE_PLUGIN_VERSION, eks-charts) as DaemonSets on the ``role=gpu-worker`` nodes with Helm, the publishers'
charts at the pinned versions (helm is a prerequisite of the aws path: the preflight says so), then wait until
every GPU node advertises ``nvidia.com/gpu = GPUS_PER_NODE`` and ``vpc.amazonaws.com/efa >= 1`` as allocatable. A
deployed release is not evidence; the allocatable is. On timeout the DaemonSets are diagnosed against the nodes
(selectors, the chart's allowlist, taints, pod states). eksctl's own EFA plugin is replaced first, and the step
fails while two plugins serve one node or the tutorial's own plugin pods are not Ready (:mod:`.owners`).
"""

from __future__ import annotations

import time
from typing import Any

from ....clients import helm
from ....clients import kubernetes as kube
from ....core.settings import Settings
from ....plan import charts
from ....plan.kube_objects import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    labels,
    match_labels_selector,
    name_of,
    node_row,
    pod_problem,
    pod_template_spec,
    selector_misses,
    untolerated_taint_texts,
)
from ....plan.plugins import CHARTS, NAMESPACE, helm_values
from ...base import PluginsResult
from .. import ownership
from . import driver, owners, prepull

#: (key, title, the resource it advertises) of both plugins.
PLUGINS = (("nvidia", "NVIDIA device plugin", GPU_RESOURCE), ("efa", "EFA device plugin", EFA_RESOURCE))


# --------------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------------


def gpu_nodes(nodes: list[dict], settings: Settings) -> list[dict]:
    """Nodes that are (or should be) GPU workers: role=gpu-worker, the GPU nodegroup, or the GPU type."""
    aws = settings.aws
    out = []
    for node in nodes:
        lab = labels(node)
        if (
            lab.get("role") == "gpu-worker"
            or lab.get("eks.amazonaws.com/nodegroup") == aws.gpu_nodegroup_name
            or lab.get("alpha.eksctl.io/nodegroup-name") == aws.gpu_nodegroup_name
            or lab.get("node.kubernetes.io/instance-type") == aws.gpu_node_type
        ):
            out.append(node)
    return out


def node_rows(nodes: list[dict], settings: Settings) -> list[dict[str, Any]]:
    """The GPU nodes' allocatable GPUs and EFA devices, each with a verdict."""
    want = settings.aws.gpus_per_node
    rows = []
    for node in gpu_nodes(nodes, settings):
        row = node_row(node)
        ok = row["gpus"] == want and row["efa"] >= 1 and row["role"] == "gpu-worker"
        row.update(
            gpu_str=f"{row['gpus']}/{want}",
            efa_str=str(row["efa"]),
            verdict="ok" if ok else ("not role=gpu-worker" if row["role"] != "gpu-worker" else "waiting"),
            ok=ok,
        )
        rows.append(row)
    return rows


def devices_ready(settings: Settings, nodes: list[dict]) -> tuple[bool, list[dict]]:
    """(GPU_NODE_COUNT GPU nodes advertise their devices and none labelled role=gpu-worker lacks them, rows)."""
    rows = node_rows(nodes, settings)
    good = [r for r in rows if r["ok"]]
    done = len(good) >= settings.aws.gpu_node_count and all(r["ok"] for r in rows if r["role"] == "gpu-worker")
    return done, rows


def find_daemonsets(client) -> dict[str, list[dict]]:
    """Every NVIDIA and every EFA plugin DaemonSet in kube-system, whoever installed them (by name or image)."""
    found: dict[str, list[dict]] = {"nvidia": [], "efa": []}
    for ds in kube.list_objects(client, "apps/v1", "DaemonSet", NAMESPACE):
        key = owners.plugin_key(ds)
        if key:
            found[key].append(ds)
    return found


def tutorial_daemonsets(found: dict[str, list[dict]]) -> dict[str, dict | None]:
    """The tutorial's own plugin DaemonSet per resource (None where absent)."""
    return {key: next((d for d in dss if owners.owner(d) == owners.TUTORIAL), None) for key, dss in found.items()}


def daemonset_row(ds: dict) -> dict[str, Any]:
    status = ds.get("status") or {}
    return dict(
        name=name_of(ds),
        owner=owners.owner(ds),
        image=owners.images(ds).rsplit("/", 1)[-1],
        desired=status.get("desiredNumberScheduled", 0),
        ready=status.get("numberReady", 0),
        available=status.get("numberAvailable", 0) or 0,
    )


def all_rows(found: dict[str, list[dict]]) -> list[dict[str, Any]]:
    return [daemonset_row(d) for dss in found.values() for d in dss]


def serving(client, settings: Settings, nodes: list[dict], found: dict[str, list[dict]]):
    """(which plugin serves each GPU node, the problems: two plugins on one node, the tutorial's pods not Ready)."""
    pods = kube.list_objects(client, "v1", "Pod", NAMESPACE)
    return owners.serving([d for dss in found.values() for d in dss], pods, gpu_nodes(nodes, settings))


def _rejections(pod_spec: dict, node: dict) -> list[str]:
    return selector_misses(pod_spec, node) + untolerated_taint_texts(pod_spec, node)


def excluded_nodes(client, settings: Settings, nodes: list[dict]) -> list[str]:
    """GPU nodes a device plugin's DaemonSet can never run on, as its pod template stands: its node
    selector/affinity misses the node's labels or a NoSchedule/NoExecute taint is not tolerated.
    Waiting does not change that (the plugins' pods would never be created there)."""
    out = []
    for ds in tutorial_daemonsets(find_daemonsets(client)).values():
        if ds is None:
            continue
        spec = pod_template_spec(ds)
        for node in gpu_nodes(nodes, settings):
            why = _rejections(spec, node)
            if why:
                out.append(f"{name_of(ds)} x {name_of(node)}: {'; '.join(why)}")
    return sorted(out)


# --------------------------------------------------------------------------------------------
# Diagnosis
# --------------------------------------------------------------------------------------------


def _node_problems(gnodes: list[dict], settings: Settings) -> list[str]:
    aws = settings.aws
    out = []
    if len(gnodes) < aws.gpu_node_count:
        out.append(
            f"{len(gnodes)} GPU node(s) registered, GPU_NODE_COUNT = {aws.gpu_node_count}. Fix: check "
            f"the GPU nodegroup {aws.gpu_nodegroup_name!r} (notebook 02; capacity in the AZ)"
        )
    for node in gnodes:
        if labels(node).get("role") != "gpu-worker":
            out.append(
                f"GPU node {name_of(node)} lacks the label role=gpu-worker: the plugins and the Ray workers "
                f"select it. Fix: label the nodegroup role=gpu-worker (notebook 02) or `kubectl label node "
                f"{name_of(node)} role=gpu-worker`"
            )
    return out


def _rejection_hint(why: str, node: dict, settings: Settings) -> str:
    if "node.kubernetes.io/instance-type" in why:
        return (
            f" -> instance type {labels(node).get('node.kubernetes.io/instance-type')} is not in the EFA "
            f"plugin's allowlist ({settings.versions.efa_device_plugin_version}). Fix: an "
            f"EFA-capable type on the list, or a newer chart"
        )
    if "nvidia.com/gpu.present" in why:
        return (
            " -> the nvidia.com/gpu.present label is missing (the chart's default affinity needs it;"
            " it comes from GPU feature discovery). Fix: label the GPU nodes "
            "nvidia.com/gpu.present=true, or install with nodeSelector role=gpu-worker and "
            "affinity null (what plugins.step does)"
        )
    if "role=gpu-worker" in why:
        return " -> label the GPU nodes role=gpu-worker"
    if "taint" in why:
        return " -> add a toleration for it, or remove the taint"
    return ""


def _unscheduled(title: str, ds: dict, gnodes: list[dict], settings: Settings) -> list[str]:
    """A DaemonSet that wants fewer pods than there are GPU nodes: which node it rejects, and why."""
    desired = (ds.get("status") or {}).get("desiredNumberScheduled", 0) or 0
    if desired >= len(gnodes):
        return []
    out = [
        f"{title}: DaemonSet {name_of(ds)} DESIRED {desired} for {len(gnodes)} GPU node(s): its "
        f"pods are not meant for these nodes"
    ]
    spec = pod_template_spec(ds)
    for node in gnodes:
        for why in _rejections(spec, node):
            out.append(f"  node {name_of(node)}: {why}{_rejection_hint(why, node, settings)}")
    return out


def _pod_problems(client, key: str, title: str, ds: dict) -> list[str]:
    """The plugin's own pods that are not Running/Ready, with what it usually means."""
    selector = match_labels_selector(ds)
    pods = kube.list_objects(client, "v1", "Pod", NAMESPACE, label_selector=selector) if selector else []
    out = []
    for pod in pods:
        problem = pod_problem(pod)
        if not problem:
            continue
        extra = ""
        if "CrashLoopBackOff" in problem and key == "nvidia":
            extra = (
                " -> the plugin exits when it finds no NVIDIA driver/GPU: the nodes need the EKS "
                "accelerated (NVIDIA) AMI"
            )
        elif "Pending" in problem or "unschedulable" in problem:
            extra = " -> a taint or selector keeps the plugin pod off its node"
        elif "ImagePull" in problem or "ErrImage" in problem:
            extra = (
                " -> the node cannot pull the plugin's image: a chart version whose image exists in the region's "
                "registry (docs/pins.md), and a route from the nodes to it"
            )
        node = (pod.get("spec") or {}).get("nodeName") or "?"
        out.append(f"  {title} pod {name_of(pod)} on {node}: {problem}{extra}")
    return out


def _advertised_problems(key: str, title: str, resource: str, gnodes: list[dict], settings: Settings) -> list[str]:
    """The plugin's pods are Ready, but a node advertises the wrong number of devices."""
    want = settings.aws.gpus_per_node
    out = []
    for node in gnodes:
        row = node_row(node)
        if key == "nvidia" and row["gpus"] != want:
            out.append(
                f"{title} pods are Ready but node {row['name']} advertises {resource}={row['gpus']}, expected "
                f"GPUS_PER_NODE={want} ({row['instance_type']}). Fix: "
                f"gpus_per_node must match the instance type; check `nvidia-smi` on the node"
            )
        if key == "efa" and row["efa"] < 1:
            out.append(
                f"{title} pods are Ready but node {row['name']} advertises no {resource}: the instance "
                f"has no EFA interface attached. Fix: the GPU nodegroup needs efaEnabled: true"
            )
    return out


def diagnose(client, settings: Settings, nodes: list[dict] | None = None) -> list[str]:
    """Why the GPUs/EFA are not allocatable: DaemonSets vs nodes, then the plugin pods."""
    nodes = nodes if nodes is not None else kube.list_objects(client, "v1", "Node")
    gnodes = gpu_nodes(nodes, settings)
    out = _node_problems(gnodes, settings)
    daemonsets = tutorial_daemonsets(find_daemonsets(client))
    for key, title, resource in PLUGINS:
        ds = daemonsets[key]
        if ds is None:
            out.append(
                f"{title}: no DaemonSet of the tutorial in {NAMESPACE}. Fix: re-run plugins.step (the install did "
                f"not happen)"
            )
            continue
        out += _unscheduled(title, ds, gnodes, settings) + _pod_problems(client, key, title, ds)
        status = ds.get("status") or {}
        desired, ready = status.get("desiredNumberScheduled", 0) or 0, status.get("numberReady", 0) or 0
        if desired and ready >= desired:
            out += _advertised_problems(key, title, resource, gnodes, settings)
    if not out:
        out.append(
            "no cause found in the DaemonSets, nodes or plugin pods; the plugins may still be registering "
            "(try a longer timeout_s)"
        )
    return out


# --------------------------------------------------------------------------------------------
# Install
# --------------------------------------------------------------------------------------------


def install(client, settings: Settings, *, log=print) -> tuple[str, list[str]]:
    """Replace eksctl's EFA plugin, then ``helm upgrade --install`` both of the tutorial's (idempotent). Returns
    (how, what was replaced)."""
    replaced = owners.replace_eksctl_efa(client, log=log)
    values = helm_values(settings)
    for key, chart, version_field in CHARTS:
        version, pin = getattr(settings.versions, version_field), charts.BY_NAME[chart["chart"]]
        if ownership.release_state(client, chart["release"], NAMESPACE, settings) == ownership.NOT_OURS:
            left = ownership.not_ours(f"Helm release {chart['release']} in {NAMESPACE}", settings, "release label")
            log(left + f"; {chart['chart']} {version} is not installed over it")
            continue
        helm.upgrade_install(
            client,
            release=chart["release"],
            chart=chart["chart"],
            repo=chart["repo"],
            version=version,
            digest=pin.digest(settings),
            namespace=NAMESPACE,
            values=values[key],
            digest_fix=charts.digest_fix(pin),
            labels=ownership.helm_labels(settings),
        )
        log(f"helm: {chart['chart']} {version} installed in {NAMESPACE} as release {chart['release']}")
    versions = settings.versions
    how = (
        f"helm charts nvidia-device-plugin {versions.nvidia_device_plugin_version}, aws-efa-k8s-device-plugin "
        f"{versions.efa_device_plugin_version}"
    )
    return how, replaced


# --------------------------------------------------------------------------------------------
# Step 03 on aws
# --------------------------------------------------------------------------------------------


def unreported_pods(client) -> list[str]:
    """The tutorial's plugin pods the kubelet has not reported on yet (Pending, no container status): just created
    by the install, neither Ready nor failed. The step waits for them before it judges which plugin serves a node."""
    mine = [ds for dss in find_daemonsets(client).values() for ds in dss if owners.owner(ds) == owners.TUTORIAL]
    selectors = [match_labels_selector(ds) for ds in mine]
    out = []
    for selector in filter(None, selectors):
        for pod in kube.list_objects(client, "v1", "Pod", NAMESPACE, label_selector=selector):
            status = pod.get("status") or {}
            if status.get("phase") in (None, "Pending") and not status.get("containerStatuses"):
                out.append(name_of(pod))
    return out


class _AllocatableProbe:
    """One poll of :func:`devices`: the GPU nodes' allocatable, logged when it changes; done once every GPU node
    advertises its devices and the kubelet has reported on each of the tutorial's plugin pods. It also ends the wait
    when the same nodes are excluded by a DaemonSet on two polls in a row (labels or taints must change)."""

    def __init__(self, client, settings: Settings, log, t0: float):
        self.client, self.settings, self.log, self.t0 = client, settings, log, t0
        self.last_line = ""
        self.excluded: list[list[str]] = [[], []]  # the previous and the latest poll's "can never run there"

    @property
    def hopeless(self) -> bool:
        return bool(self.excluded[1]) and self.excluded[0] == self.excluded[1]

    def __call__(self) -> tuple[bool, tuple[list[dict], list[dict]]]:
        nodes = kube.list_objects(self.client, "v1", "Node")
        done, rows = devices_ready(self.settings, nodes)
        line = ", ".join(f"{r['name']}: gpu {r['gpu_str']} efa {r['efa_str']}" for r in rows) or "no GPU nodes"
        if line != self.last_line:
            self.log(f"  [{time.monotonic() - self.t0:5.0f}s] {line}")
            self.last_line = line
        if done and not unreported_pods(self.client):
            return True, (nodes, rows)
        self.excluded[:] = [self.excluded[1], excluded_nodes(self.client, self.settings, nodes)]
        return self.hopeless, (nodes, rows)


def _why_notes(settings: Settings, found: dict[str, list[dict]], replaced: list[str]) -> list[str]:
    """Which EFA plugin is the tutorial's, and why that one."""
    mine = tutorial_daemonsets(found)["efa"]
    notes = list(replaced)
    if mine is not None:
        notes.append(
            f"EFA device plugin: {owners.describe(mine)}, eks-charts aws-efa-k8s-device-plugin "
            f"{settings.versions.efa_device_plugin_version}: the pinned chart's image and allowlist (docs/pins.md); "
            f"eksctl re-creates its own copy at every `eksctl create nodegroup` of an EFA node group: run 03 again then"
        )
    return notes


def _message(ok: bool, problems: list[str], hopeless: bool, elapsed: float, timeout_s: float) -> str:
    if ok:
        return "every GPU node advertises its GPUs and EFA, each through one plugin of the tutorial"
    if problems:
        return f"{len(problems)} problem(s) with the plugins that serve the GPU nodes (see DIAGNOSIS)"
    if hopeless:
        return (
            f"GPUs/EFA not allocatable after {elapsed:.0f} s: stopped waiting, a device plugin's DaemonSet does "
            f"not admit the GPU nodes (their labels or taints must change)"
        )
    return f"GPUs/EFA not allocatable after {timeout_s:g} s"


def devices(
    settings: Settings,
    *,
    assume_yes: bool = False,
    timeout_s: float = 600,
    poll_s: float = 10.0,
    client=None,
    log=print,
) -> PluginsResult:
    """Notebook 03 on aws. ``assume_yes`` is accepted for symmetry: the only object deleted that the tutorial did
    not create is eksctl's EFA plugin, which it replaces (module docstring of :mod:`.owners`)."""
    if ownership.existing(settings):  # the learner's cluster: its device plugins are read, never installed
        res = status(settings, client=client)
        res.message = "; ".join(
            x for x in (f"{ownership.SETTING}: true - the device plugins are read, not installed", res.message) if x
        )
        return res
    t0 = time.monotonic()
    try:
        with kube.using_client(settings, client) as api:
            pulling = prepull.start(api, settings, log=log)  # the GPU nodes pull the Ray image while 03 and 04 run
            method, replaced = install(api, settings, log=log)
            probe = _AllocatableProbe(api, settings, log, t0)
            waited = kube.wait_for(probe, timeout_s=timeout_s, interval_s=poll_s)
            hopeless = waited.ok and probe.hopeless
            nodes, rows = (
                waited.value if isinstance(waited.value, tuple) else (kube.list_objects(api, "v1", "Node"), [])
            )
            found = find_daemonsets(api)
            served, problems = serving(api, settings, nodes, found)
            drivers: list[str] = []
            if waited.ok and not hopeless and not problems:  # the plugins serve every GPU node: read its driver
                _, low, drivers = driver.read_drivers(api, settings, gpu_nodes(nodes, settings))
                problems += low
            ok = waited.ok and not hopeless and not problems
            elapsed = time.monotonic() - t0
            diagnosis = problems + ([] if waited.ok and not hopeless else diagnose(api, settings, nodes))
    except kube.K8sError as e:
        return PluginsResult("aws", "up", False, str(e), elapsed_s=time.monotonic() - t0)
    return PluginsResult(
        "aws",
        "up",
        ok,
        _message(ok, problems, hopeless, elapsed, timeout_s),
        nodes=rows or node_rows(nodes, settings),
        install_method=method,
        daemonsets=all_rows(found),
        serving=served,
        notes=_why_notes(settings, found, replaced) + drivers + [pulling],
        diagnosis=diagnosis,
        elapsed_s=elapsed,
    )


def status(settings: Settings, *, client=None) -> PluginsResult:
    """The GPU nodes' allocatable, the plugin DaemonSets and which serves each node, without installing anything."""
    try:
        with kube.using_client(settings, client) as api:
            nodes = kube.list_objects(api, "v1", "Node")
            done, rows = devices_ready(settings, nodes)
            found = find_daemonsets(api)
            served, problems = serving(api, settings, nodes, found)
    except kube.K8sError as e:
        return PluginsResult("aws", "status", False, str(e))
    return PluginsResult(
        "aws",
        "status",
        done and not problems,
        nodes=rows,
        daemonsets=all_rows(found),
        serving=served,
        diagnosis=problems,
    )


def _delete_plugins(client, settings: Settings, *, log) -> set[str]:
    """The tutorial's own plugins only: its Helm releases (labelled for this cluster), uninstalled. Returns the names
    of the DaemonSets kept although they look like the tutorial's (a release of the same name, not labelled)."""
    kept = set()
    for dss in find_daemonsets(client).values():
        for ds in dss:
            if owners.owner(ds) != owners.TUTORIAL:
                continue
            release = owners.helm_release(ds) or name_of(ds)
            if ownership.release_state(client, release, NAMESPACE, settings) != ownership.OURS:
                kept.add(name_of(ds))
                log(ownership.not_ours(f"Helm release {release} in {NAMESPACE}", settings, "release label"))
                continue
            helm.uninstall(client, release, NAMESPACE)
            log(f"helm uninstall {release} -n {NAMESPACE}")
    return kept


def _teardown_rows(found: dict[str, list[dict]], kept: set[str] = frozenset()) -> list[tuple[str, str]]:
    rows = []
    for key, dss in found.items():
        mine = [d for d in dss if owners.owner(d) == owners.TUTORIAL and name_of(d) not in kept]
        rows.append((f"DaemonSet ({key} device plugin)", "STILL PRESENT: " + name_of(mine[0]) if mine else "absent"))
        for d in dss:
            if name_of(d) in kept:
                rows.append((f"DaemonSet {name_of(d)}", "kept: its Helm release is not the tutorial's"))
            elif owners.owner(d) == owners.EKSCTL:
                rows.append((f"DaemonSet {name_of(d)}", "kept: eksctl's own; `eksctl delete cluster` removes it"))
            elif owners.owner(d) == owners.OTHER:
                rows.append((f"DaemonSet {name_of(d)}", "kept: not installed by the tutorial"))
    return rows


def teardown(
    settings: Settings,
    assume_yes: bool = False,
    *,
    timeout_s: float = 180,
    poll_s: float = 5.0,
    client=None,
    log=print,
) -> PluginsResult:
    """Uninstall the tutorial's two plugins (its Helm releases), verified by listing; a plugin the tutorial did not
    install (eksctl's EFA copy re-created by a later node group) is kept. Never prompts."""
    if not assume_yes:
        return PluginsResult(
            "aws",
            "teardown",
            False,
            "refused: this deletes the NVIDIA and EFA device plugins. Fix: teardown(settings, assume_yes=True)",
        )
    t0 = time.monotonic()
    try:
        with kube.using_client(settings, client) as api:
            kept = _delete_plugins(api, settings, log=log)
            waited = kube.wait_for(
                lambda: (
                    not [d for d in tutorial_daemonsets(find_daemonsets(api)).values() if d and name_of(d) not in kept],
                    None,
                ),
                timeout_s=timeout_s,
                interval_s=poll_s,
            )
            left = find_daemonsets(api)
    except kube.K8sError as e:
        return PluginsResult("aws", "teardown", False, str(e), elapsed_s=time.monotonic() - t0)
    return PluginsResult(
        "aws",
        "teardown",
        waited.ok,
        "the tutorial's device plugins deleted" if waited.ok else "plugins still present",
        deleted=_teardown_rows(left, kept),
        elapsed_s=time.monotonic() - t0,
    )


__all__ = [
    "PLUGINS",
    "all_rows",
    "daemonset_row",
    "devices",
    "devices_ready",
    "diagnose",
    "excluded_nodes",
    "find_daemonsets",
    "gpu_nodes",
    "install",
    "node_rows",
    "serving",
    "status",
    "teardown",
    "tutorial_daemonsets",
    "unreported_pods",
]
