"""Step 03: the device plugins that make GPUs and EFA schedulable.

``aws``: install the NVIDIA device plugin (NVIDIA_DEVICE_PLUGIN_VERSION) and the AWS EFA device plugin
(EFA_DEVICE_PLUGIN_VERSION, eks-charts) as DaemonSets on the ``role=gpu-worker`` nodes - with Helm at the
pinned chart versions when ``helm`` is on PATH, else the rendered manifests through the Kubernetes API -
then wait until every GPU node advertises ``nvidia.com/gpu = GPUS_PER_NODE`` and
``vpc.amazonaws.com/efa >= 1`` as allocatable. A deployed release is not evidence; the allocatable is.
On timeout the DaemonSets are diagnosed against the nodes (selectors, allowlist, taints, pod states).

``local``: no plugins exist; the step shows which devices and backends each local raylet offers.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import k8s
from .config import ConfigError, Settings

NAMESPACE = "kube-system"
NVIDIA_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v{version}"
NVIDIA_CHART = dict(release="nvidia-device-plugin", chart="nvidia-device-plugin",
                    repo="https://nvidia.github.io/k8s-device-plugin")
EFA_CHART = dict(release="aws-efa-k8s-device-plugin", chart="aws-efa-k8s-device-plugin",
                 repo="https://aws.github.io/eks-charts")
EFA_IMAGE_REPO = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin"
#: eks-charts aws-efa-k8s-device-plugin chart version -> the image tag that chart deploys (its values.yaml).
EFA_IMAGE_TAGS = {
    "v0.5.29": "v0.5.20",
    "v0.5.31": "v0.5.21-eksbuild.9",
    "v0.5.32": "v0.5.21-eksbuild.13",
}
#: The chart's supportedInstanceLabels (node.kubernetes.io/instance-type) without the SageMaker ``ml.*``
#: entries: the plugin's DaemonSet runs only on these instance types.
EFA_ALLOWLIST = [
    "m5dn.24xlarge", "m5dn.metal", "m5n.24xlarge", "m5n.metal", "m5zn.12xlarge", "m5zn.metal", "m6a.48xlarge",
    "m6a.metal", "m6i.32xlarge", "m6i.metal", "m6id.32xlarge", "m6id.metal", "m6idn.32xlarge", "m6idn.metal",
    "m6in.32xlarge", "m6in.metal", "m7a.48xlarge", "m7a.metal-48xl", "m7g.16xlarge", "m7g.metal", "m7gd.16xlarge",
    "m7i.48xlarge", "m7i.metal-48xl", "c5n.9xlarge", "c5n.18xlarge", "c5n.metal", "c6a.48xlarge", "c6a.metal",
    "c6gn.16xlarge", "c6i.32xlarge", "c6i.metal", "c6id.32xlarge", "c6id.metal", "c6in.32xlarge", "c6in.metal",
    "c7a.48xlarge", "c7a.metal-48xl", "c7g.16xlarge", "c7g.metal", "c7gd.16xlarge", "c7gn.16xlarge",
    "c7i.48xlarge", "c7i.metal-48xl", "r5dn.24xlarge", "r5dn.metal", "r5n.24xlarge", "r5n.metal", "r6a.48xlarge",
    "r6a.metal", "r6i.32xlarge", "r6i.metal", "r6idn.32xlarge", "r6idn.metal", "r6in.32xlarge", "r6in.metal",
    "r6id.32xlarge", "r6id.metal", "r7a.48xlarge", "r7a.metal-48xl", "r7g.16xlarge", "r7g.metal", "r7gd.16xlarge",
    "r7i.48xlarge", "r7i.metal-48xl", "r7iz.32xlarge", "r7iz.metal-32xl", "x2idn.32xlarge", "x2idn.metal",
    "x2iedn.32xlarge", "x2iedn.metal", "x2iezn.12xlarge", "x2iezn.metal", "i3en.12xlarge", "i3en.24xlarge",
    "i3en.metal", "i4g.16xlarge", "i4i.32xlarge", "i4i.metal", "im4gn.16xlarge", "dl1.24xlarge", "dl2q.24xlarge",
    "g4dn.8xlarge", "g4dn.12xlarge", "g4dn.16xlarge", "g4dn.metal", "g5.8xlarge", "g5.12xlarge", "g5.16xlarge",
    "g5.24xlarge", "g5.48xlarge", "g6.8xlarge", "g6.12xlarge", "g6.16xlarge", "g6.24xlarge", "g6.48xlarge",
    "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge", "gr6.8xlarge", "inf1.24xlarge",
    "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "vt1.24xlarge", "hpc6a.48xlarge", "hpc6id.32xlarge",
    "hpc7a.12xlarge", "hpc7a.24xlarge", "hpc7a.48xlarge", "hpc7a.96xlarge", "hpc7g.4xlarge", "hpc7g.8xlarge",
    "hpc7g.16xlarge",
]
GPU_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
]


def plugin_values(settings: Settings) -> dict[str, Any]:
    """Template values (as ``plugins``): images and the EFA allowlist."""
    v = settings.versions
    tag = EFA_IMAGE_TAGS.get(v.efa_device_plugin_version)
    if tag is None:
        raise ConfigError(
            f"versions.efa_device_plugin_version (EFA_DEVICE_PLUGIN_VERSION) = {v.efa_device_plugin_version!r}: the "
            f"image tag that chart version deploys is not known here. Fix: use one of "
            f"{', '.join(EFA_IMAGE_TAGS)}, or add it to raytrain_helpers.plugins.EFA_IMAGE_TAGS (from the chart's "
            f"values.yaml image.tag)")
    return dict(nvidia_image=NVIDIA_IMAGE.format(version=v.nvidia_device_plugin_version),
                efa_image=f"{EFA_IMAGE_REPO}:{tag}", efa_allowlist=list(EFA_ALLOWLIST))


def render_plugins(settings: Settings) -> list[dict[str, Any]]:
    from .render import render_objects
    pv = plugin_values(settings)
    return (render_objects("nvidia-device-plugin.yaml.j2", settings, plugins=pv)
            + render_objects("efa-device-plugin.yaml.j2", settings, plugins=pv))


def helm_values(settings: Settings) -> dict[str, dict[str, Any]]:
    """Values for the two charts: role=gpu-worker nodes, both taints tolerated. ``affinity: None`` removes
    the NVIDIA chart's default affinity on NFD labels (nvidia.com/gpu.present...) that EKS nodes lack."""
    return {
        "nvidia": {"nodeSelector": {"role": "gpu-worker"}, "affinity": None, "tolerations": GPU_TOLERATIONS},
        "efa": {"nodeSelector": {"role": "gpu-worker"}, "tolerations": GPU_TOLERATIONS[1:]},
    }


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------

@dataclass
class PluginsResult:
    target: str
    action: str
    ok: bool
    message: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    install_method: str = ""
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def show(self) -> None:
        print(f"device plugins ({self.target}, {self.action}): {'OK' if self.ok else 'NOT OK'}"
              + (f" - {self.message}" if self.message else ""))
        if self.install_method:
            print(f"  installed with: {self.install_method}")
        if self.target == "local" and self.nodes:
            k8s.table([(n["node"], n["role"], n["gpus"], n["backend"], n["train_slots"], n["state"]) for n in self.nodes],
                      ["node", "role", "GPUs", "backend", "train slots", "state"],
                      title="Devices and collective backends per local node (no device plugins locally)")
        elif self.nodes:
            k8s.table([(n["name"], n["instance_type"], n["zone"], n["gpu_str"], n["efa_str"], n["verdict"])
                       for n in self.nodes], ["node", "instance type", "zone", "nvidia.com/gpu", "vpc.amazonaws.com/efa",
                                              "verdict"], title="Allocatable on the GPU nodes")
        if self.daemonsets:
            k8s.table([(d["name"], d["desired"], d["ready"], d["available"]) for d in self.daemonsets],
                      ["DaemonSet (kube-system)", "desired", "ready", "available"])
        if self.deleted:
            k8s.table(self.deleted, ["object", "state"], title="Teardown (verified by listing)")
        for d in self.diagnosis:
            print(f"  DIAGNOSIS: {d}")


# --------------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------------

def gpu_nodes(nodes: list[dict], settings: Settings) -> list[dict]:
    """Nodes that are (or should be) GPU workers: role=gpu-worker, the GPU nodegroup, or the GPU type."""
    out = []
    for n in nodes:
        lab = k8s.labels(n)
        if (lab.get("role") == "gpu-worker" or lab.get("eks.amazonaws.com/nodegroup") == settings.aws.gpu_nodegroup_name
                or lab.get("alpha.eksctl.io/nodegroup-name") == settings.aws.gpu_nodegroup_name
                or lab.get("node.kubernetes.io/instance-type") == settings.aws.gpu_node_type):
            out.append(n)
    return out


def node_rows(nodes: list[dict], settings: Settings) -> list[dict[str, Any]]:
    want = settings.aws.gpus_per_node
    rows = []
    for n in gpu_nodes(nodes, settings):
        r = k8s.node_row(n)
        ok = r["gpus"] == want and r["efa"] >= 1 and r["role"] == "gpu-worker"
        r.update(gpu_str=f"{r['gpus']}/{want}", efa_str=str(r["efa"]),
                 verdict="ok" if ok else ("not role=gpu-worker" if r["role"] != "gpu-worker" else "waiting"),
                 ok=ok)
        rows.append(r)
    return rows


def _ready_count(settings: Settings, nodes: list[dict]) -> tuple[bool, list[dict]]:
    rows = node_rows(nodes, settings)
    good = [r for r in rows if r["ok"]]
    return len(good) >= settings.aws.gpu_node_count and all(r["ok"] for r in rows if r["role"] == "gpu-worker"), rows


def find_daemonsets(client) -> dict[str, dict | None]:
    found: dict[str, dict | None] = {"nvidia": None, "efa": None}
    for ds in k8s.list_objects(client, "apps/v1", "DaemonSet", NAMESPACE):
        n = k8s.name_of(ds)
        if "nvidia-device-plugin" in n and found["nvidia"] is None:
            found["nvidia"] = ds
        elif "efa-k8s-device-plugin" in n and found["efa"] is None:
            found["efa"] = ds
    return found


def _ds_row(ds: dict) -> dict[str, Any]:
    st = ds.get("status") or {}
    return dict(name=k8s.name_of(ds), desired=st.get("desiredNumberScheduled", 0), ready=st.get("numberReady", 0),
                available=st.get("numberAvailable", 0) or 0)


def excluded_nodes(client, settings: Settings, nodes: list[dict]) -> list[str]:
    """GPU nodes a device plugin's DaemonSet can never run on, as its pod template stands: its node
    selector/affinity misses the node's labels or a NoSchedule/NoExecute taint is not tolerated.
    Waiting does not change that (the plugins' pods would never be created there)."""
    out = []
    for key, ds in find_daemonsets(client).items():
        if ds is None:
            continue
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        for n in gpu_nodes(nodes, settings):
            why = k8s.selector_misses(spec, n) + [
                f"untolerated taint {t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                for t in k8s.untolerated_taints(spec.get("tolerations") or [], n)]
            if why:
                out.append(f"{k8s.name_of(ds)} x {k8s.name_of(n)}: {'; '.join(why)}")
    return sorted(out)


def diagnose(client, settings: Settings, nodes: list[dict] | None = None) -> list[str]:
    """Why the GPUs/EFA are not allocatable: DaemonSets vs nodes, then the plugin pods."""
    nodes = nodes if nodes is not None else k8s.list_objects(client, "v1", "Node")
    out: list[str] = []
    gnodes = gpu_nodes(nodes, settings)
    if len(gnodes) < settings.aws.gpu_node_count:
        out.append(f"{len(gnodes)} GPU node(s) registered, GPU_NODE_COUNT = {settings.aws.gpu_node_count}. Fix: check "
                   f"the GPU nodegroup {settings.aws.gpu_nodegroup_name!r} (notebook 02; capacity in the AZ)")
    for n in gnodes:
        if k8s.labels(n).get("role") != "gpu-worker":
            out.append(f"GPU node {k8s.name_of(n)} lacks the label role=gpu-worker: the plugins and the Ray workers "
                       f"select it. Fix: label the nodegroup role=gpu-worker (notebook 02) or `kubectl label node "
                       f"{k8s.name_of(n)} role=gpu-worker`")
    dss = find_daemonsets(client)
    for key, title, resource in (("nvidia", "NVIDIA device plugin", k8s.GPU_RESOURCE),
                                 ("efa", "EFA device plugin", k8s.EFA_RESOURCE)):
        ds = dss[key]
        if ds is None:
            out.append(f"{title}: no DaemonSet in {NAMESPACE}. Fix: re-run plugins.step (the install did not happen)")
            continue
        st = ds.get("status") or {}
        desired = st.get("desiredNumberScheduled", 0) or 0
        pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        if desired < len(gnodes):
            out.append(f"{title}: DaemonSet {k8s.name_of(ds)} DESIRED {desired} for {len(gnodes)} GPU node(s): its "
                       f"pods are not meant for these nodes")
            for n in gnodes:
                why = k8s.selector_misses(pod_spec, n)
                why += [f"untolerated taint {t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                        for t in k8s.untolerated_taints(pod_spec.get("tolerations") or [], n)]
                lab = k8s.labels(n)
                for w in why:
                    hint = ""
                    if "node.kubernetes.io/instance-type" in w:
                        hint = (f" -> instance type {lab.get('node.kubernetes.io/instance-type')} is not in the EFA "
                                f"plugin's allowlist ({settings.versions.efa_device_plugin_version}). Fix: an "
                                f"EFA-capable type on the list, or a newer chart")
                    elif "nvidia.com/gpu.present" in w:
                        hint = (" -> the nvidia.com/gpu.present label is missing (the chart's default affinity needs it;"
                                " it comes from GPU feature discovery). Fix: label the GPU nodes "
                                "nvidia.com/gpu.present=true, or install with nodeSelector role=gpu-worker and "
                                "affinity null (what plugins.step does)")
                    elif "role=gpu-worker" in w:
                        hint = " -> label the GPU nodes role=gpu-worker"
                    elif "taint" in w:
                        hint = " -> add a toleration for it, or remove the taint"
                    out.append(f"  node {k8s.name_of(n)}: {w}{hint}")
        sel = ",".join(f"{k}={v}" for k, v in (((ds.get("spec") or {}).get("selector") or {})
                                                .get("matchLabels") or {}).items())
        pods = k8s.list_objects(client, "v1", "Pod", NAMESPACE, label_selector=sel) if sel else []
        for p in pods:
            prob = k8s.pod_problem(p)
            if prob:
                extra = ""
                if "CrashLoopBackOff" in prob and key == "nvidia":
                    extra = (" -> the plugin exits when it finds no NVIDIA driver/GPU: the nodes need the EKS "
                             "accelerated (NVIDIA) AMI")
                elif "Pending" in prob or "unschedulable" in prob:
                    extra = " -> a taint or selector keeps the plugin pod off its node"
                out.append(f"  {title} pod {k8s.name_of(p)} on {(p.get('spec') or {}).get('nodeName') or '?'}: "
                           f"{prob}{extra}")
        ready = st.get("numberReady", 0) or 0
        if desired and ready >= desired:
            for n in gnodes:
                r = k8s.node_row(n)
                have = r["gpus"] if key == "nvidia" else r["efa"]
                if key == "nvidia" and have != settings.aws.gpus_per_node:
                    out.append(f"{title} pods are Ready but node {r['name']} advertises {resource}={have}, expected "
                               f"GPUS_PER_NODE={settings.aws.gpus_per_node} ({r['instance_type']}). Fix: "
                               f"gpus_per_node must match the instance type; check `nvidia-smi` on the node")
                if key == "efa" and have < 1:
                    out.append(f"{title} pods are Ready but node {r['name']} advertises no {resource}: the instance "
                               f"has no EFA interface attached. Fix: the GPU nodegroup needs efaEnabled: true")
    if not out:
        out.append("no cause found in the DaemonSets, nodes or plugin pods; the plugins may still be registering "
                   "(try a longer timeout_s)")
    return out


# --------------------------------------------------------------------------------------------
# Step 03
# --------------------------------------------------------------------------------------------

def _step_local(settings: Settings) -> PluginsResult:
    from .targets import local
    info = local.status(settings)
    rows = []
    for n in info.nodes:
        res = n.get("resources") or {}
        g = int(res.get("GPU", 0))
        slots = int(res.get("train_slot", 0))
        backend = "-" if n["role"] == "head" else ("NCCL" if g > 0 else "gloo")
        rows.append(dict(node=n.get("name") or n["node_id"][:8], role=n["role"], gpus=g, backend=backend,
                         train_slots=slots, state="alive" if n.get("alive") else "DEAD"))
    has_slot = any(r["role"] == "worker" and r["train_slots"] > 0 and r["state"] == "alive" for r in rows)
    if not info.running:
        msg = "the local cluster is not running. Fix: notebook 02 (cluster.step(settings, 'up'))"
    elif not has_slot:
        msg = "no worker node offers a train_slot: the training job could not be placed"
    else:
        msg = "Ray sees local GPUs through CUDA_VISIBLE_DEVICES; EFA has no local stand-in"
    return PluginsResult("local", "up", info.running and has_slot, msg, nodes=rows)


def install(client, settings: Settings, *, log=print) -> str:
    """Install both plugins (idempotent). Helm when on PATH, else the rendered DaemonSets."""
    from .kuberay import _helm, _helm_base, run_helm
    v = settings.versions
    try:
        rendered = render_plugins(settings)
    except ConfigError:
        if not _helm():
            raise
        rendered = []          # an EFA chart version without a known image tag: only Helm can install it
    live = {k8s.name_of(d): d for d in k8s.list_objects(client, "apps/v1", "DaemonSet", NAMESPACE)}
    if _helm():
        # two plugins for one device on a node fight over it: drop what the manifest path applied before
        for obj in rendered:
            old = live.get(k8s.name_of(obj))
            if old is not None and k8s.labels(old).get("app.kubernetes.io/part-of") == k8s.PART_OF:
                k8s.delete(client, "apps/v1", "DaemonSet", k8s.name_of(obj), NAMESPACE)
                log(f"deleted DaemonSet {NAMESPACE}/{k8s.name_of(obj)} (rendered earlier; Helm replaces it)")
        vals = helm_values(settings)
        with tempfile.TemporaryDirectory() as td:
            for key, chart, ver in (("nvidia", NVIDIA_CHART, v.nvidia_device_plugin_version),
                                    ("efa", EFA_CHART, v.efa_device_plugin_version)):
                f = Path(td) / f"{key}-values.yaml"
                f.write_text(yaml.safe_dump(vals[key], sort_keys=False))
                run_helm(["upgrade", "--install", chart["release"], chart["chart"], "--repo", chart["repo"],
                          "--version", ver, "--namespace", NAMESPACE, "-f", str(f), *_helm_base(client)])
                log(f"helm: {chart['chart']} {ver} installed in {NAMESPACE}")
        return (f"helm charts nvidia-device-plugin {v.nvidia_device_plugin_version}, aws-efa-k8s-device-plugin "
                f"{v.efa_device_plugin_version}")
    helm_owned = {key: d for key, d in find_daemonsets(client).items()
                  if d is not None and k8s.labels(d).get("app.kubernetes.io/managed-by") == "Helm"}
    for obj in rendered:
        key = "nvidia" if "nvidia" in k8s.name_of(obj) else "efa"
        if key in helm_owned:
            log(f"DaemonSet {NAMESPACE}/{k8s.name_of(helm_owned[key])} is a Helm release: left as it is (no helm "
                f"here to upgrade it; a second plugin would fight over the devices)")
            continue
        k8s.apply(client, obj)
        log(f"applied DaemonSet {NAMESPACE}/{k8s.name_of(obj)} (server-side apply)")
    return "rendered manifests (server-side apply)"


def step(settings: Settings, *, assume_yes: bool = False, timeout_s: float = 600, poll_s: float = 10.0,
         client=None, log=print) -> PluginsResult:
    """Notebook 03's entry point. ``assume_yes`` is accepted for symmetry: installing plugins deletes nothing."""
    if settings.target == "local":
        return _step_local(settings)
    t0 = time.monotonic()
    own = client is None
    try:
        client = client or k8s.api_client(settings)
        method = install(client, settings, log=log)
        last = [""]
        never: list[list[str]] = [[], []]     # the previous and the latest poll's "can never run there"

        def probe():
            nodes = k8s.list_objects(client, "v1", "Node")
            done, rows = _ready_count(settings, nodes)
            line = ", ".join(f"{r['name']}: gpu {r['gpu_str']} efa {r['efa_str']}" for r in rows) or "no GPU nodes"
            if line != last[0]:
                log(f"  [{time.monotonic() - t0:5.0f}s] {line}")
                last[0] = line
            if done:
                return True, (nodes, rows)
            never[:] = [never[1], excluded_nodes(client, settings, nodes)]
            # the same exclusion on two polls in a row: waiting cannot help (labels/taints must change)
            return bool(never[1]) and never[0] == never[1], (nodes, rows)
        w = k8s.wait_for(probe, timeout_s=timeout_s, interval_s=poll_s)
        hopeless = w.ok and bool(never[1]) and never[0] == never[1]
        ok = w.ok and not hopeless
        nodes, rows = w.value if isinstance(w.value, tuple) else (k8s.list_objects(client, "v1", "Node"), [])
        if not rows:
            rows = node_rows(nodes, settings)
        dss = [_ds_row(d) for d in find_daemonsets(client).values() if d]
        elapsed = time.monotonic() - t0
        msg = ("every GPU node advertises its GPUs and EFA" if ok else
               f"GPUs/EFA not allocatable after {elapsed:.0f} s: stopped waiting, a device plugin's DaemonSet does "
               f"not admit the GPU nodes (their labels or taints must change)" if hopeless else
               f"GPUs/EFA not allocatable after {timeout_s:g} s")
        res = PluginsResult("aws", "up", ok, msg, nodes=rows, install_method=method, daemonsets=dss,
                            elapsed_s=elapsed)
        if not ok:
            res.diagnosis = diagnose(client, settings, nodes)
        return res
    except k8s.K8sError as e:
        return PluginsResult("aws", "up", False, str(e), elapsed_s=time.monotonic() - t0)
    finally:
        if own and client is not None:
            client.close()


def status(settings: Settings, *, client=None) -> PluginsResult:
    if settings.target == "local":
        r = _step_local(settings)
        r.action = "status"
        return r
    own = client is None
    try:
        client = client or k8s.api_client(settings)
        nodes = k8s.list_objects(client, "v1", "Node")
        done, rows = _ready_count(settings, nodes)
        dss = [_ds_row(d) for d in find_daemonsets(client).values() if d]
        return PluginsResult("aws", "status", done, nodes=rows, daemonsets=dss)
    except k8s.K8sError as e:
        return PluginsResult("aws", "status", False, str(e))
    finally:
        if own and client is not None:
            client.close()


def teardown(settings: Settings, assume_yes: bool = False, *, timeout_s: float = 180, poll_s: float = 5.0,
             client=None, log=print) -> PluginsResult:
    """Delete both plugins (Helm releases or the rendered DaemonSets); verified by listing. Never prompts."""
    if settings.target == "local":
        return PluginsResult("local", "teardown", True, "nothing to delete: no device plugins on the local target")
    if not assume_yes:
        return PluginsResult("aws", "teardown", False, "refused: this deletes the NVIDIA and EFA device plugins. Fix: "
                             "teardown(settings, assume_yes=True)")
    from .kuberay import _helm, _helm_base, run_helm
    own = client is None
    t0 = time.monotonic()
    try:
        client = client or k8s.api_client(settings)
        for key, ds in find_daemonsets(client).items():
            if ds is None:
                continue
            if k8s.labels(ds).get("app.kubernetes.io/managed-by") == "Helm" and _helm():
                rel = (ds.get("metadata") or {}).get("annotations", {}).get("meta.helm.sh/release-name") or (
                    NVIDIA_CHART if key == "nvidia" else EFA_CHART)["release"]
                run_helm(["uninstall", rel, "--namespace", NAMESPACE, *_helm_base(client)])
                log(f"helm uninstall {rel} -n {NAMESPACE}")
            else:
                k8s.delete(client, "apps/v1", "DaemonSet", k8s.name_of(ds), NAMESPACE)
                log(f"deleted DaemonSet {NAMESPACE}/{k8s.name_of(ds)}")
        w = k8s.wait_for(lambda: (not any(find_daemonsets(client).values()), None), timeout_s=timeout_s,
                         interval_s=poll_s)
        left = find_daemonsets(client)
        rows = [(f"DaemonSet ({key} device plugin)", "STILL PRESENT: " + k8s.name_of(d) if d else "absent")
                for key, d in left.items()]
        return PluginsResult("aws", "teardown", w.ok, "device plugins deleted" if w.ok else "plugins still present",
                             deleted=rows, elapsed_s=time.monotonic() - t0)
    except k8s.K8sError as e:
        return PluginsResult("aws", "teardown", False, str(e), elapsed_s=time.monotonic() - t0)
    finally:
        if own and client is not None:
            client.close()


def register_cli(sub) -> None:
    from .cli import add_settings_args
    p = sub.add_parser("plugins", help="NVIDIA + EFA device plugins (notebook 03): up, status, down")
    p.add_argument("action", choices=("up", "status", "down"))
    p.add_argument("--yes", action="store_true", help="allow the destructive action (down)")
    p.add_argument("--timeout", type=float, default=600)
    add_settings_args(p)
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from .cli import settings_from_args
    s = settings_from_args(args)
    r = (step(s, timeout_s=args.timeout) if args.action == "up" else status(s) if args.action == "status"
         else teardown(s, assume_yes=args.yes))
    r.show()
    return 0 if r.ok else 1


__all__ = ["step", "status", "teardown", "diagnose", "excluded_nodes", "install", "render_plugins", "plugin_values", "helm_values",
           "PluginsResult", "EFA_ALLOWLIST", "EFA_IMAGE_TAGS", "gpu_nodes"]
