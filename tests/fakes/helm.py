"""A fake ``helm`` for the Kubernetes API stand-in: what helm v4.2.4 does to a cluster for the three charts the aws
path installs, and nothing else.

It models helm v4.2.4 (helm/helm tag v4.2.4, commit 3900f434, the newest release in the repository read
2026-12-06), the newest helm the preflight accepts (``raytrain_helpers.targets.aws.preflight.HELM_MODELLED``). Sources
below are files of that tag unless named otherwise.

* ``version --short`` prints ``v4.2.4+g3900f43`` (``pkg/cmd/version.go`` ``formatVersion``: the version, ``+g`` and
  the commit's first 7 characters).
* objects are written by server-side apply with the field manager ``helm`` (``pkg/action/install.go``
  ``NewInstall``: ``ServerSideApply: true``, the CLI's default; ``pkg/kube/client.go`` ``getManagedFieldsManager``:
  the program's name). helm 3 merged on the client instead; nothing the tutorial reads tells the two apart.
* ``upgrade --install RELEASE CHART --repo R --version V --namespace NS [--create-namespace] -f VALUES
  [--kube-context C] [--kubeconfig K]`` writes the objects the published chart renders at that version, with the
  values merged over the chart's defaults, into the cluster the kubeconfig names. Helm labels and annotates every
  object of a release (``app.kubernetes.io/managed-by: Helm``, ``meta.helm.sh/release-name``/``-namespace``) and
  names the workload after the release when the release name contains the chart name (each chart's
  ``_helpers.tpl`` ``fullname``). Sources, read 2026-12-05:
  - aws/eks-charts @ 52396092 ``stable/aws-efa-k8s-device-plugin`` v0.5.30: ``templates/daemonset.yaml``
    (selector ``name: <fullname>``, toleration CriticalAddonsOnly plus ``.Values.tolerations``, the node affinity of
    ``supportedInstanceLabels``), ``values.yaml`` (image ``.../eks/aws-efa-k8s-device-plugin:v0.5.20``);
  - NVIDIA/k8s-device-plugin v0.20.0 ``deployments/helm/nvidia-device-plugin``: ``values.yaml`` (default affinity on
    the NFD/GFD labels, tolerations CriticalAddonsOnly and nvidia.com/gpu), selector labels
    ``app.kubernetes.io/name``/``instance``;
  - ray-project/kuberay v1.7.0 ``helm-chart/kuberay-operator``: Deployment ``<fullname>``, pod label
    ``app.kubernetes.io/name: kuberay-operator``, image ``quay.io/kuberay/operator:v1.7.0``, and ``crds/`` (helm
    creates those CRDs on install, never on upgrade).
  The EFA allowlist here is the stand-in's EFA-capable types (the published one has 303 types).
* ``--labels K=V,...`` on ``upgrade --install`` labels the release record (merged over its labels on an upgrade);
  ``list --all --namespace NS --output json [--selector K=V,...]`` lists the namespace's releases whose labels match
  (helm/helm v4.2.4 ``pkg/cmd/upgrade.go`` and ``pkg/cmd/install.go``, the ``--labels`` flag; ``pkg/action/upgrade.go``
  ``mergeCustomLabels``; ``pkg/cmd/list.go``, the ``--selector`` flag and the ``name``/``namespace``/``status``/
  ``chart`` of its JSON).
* ``uninstall RELEASE --namespace NS`` deletes the release's objects; an unknown release fails as helm does
  (``Error: uninstall: Release not loaded: NAME: release: not found``, exit 1: ``pkg/action/uninstall.go`` ``Run``,
  ``pkg/storage/driver/driver.go`` ``ErrReleaseNotFound``); the release record is the Secret
  ``sh.helm.release.v1.NAME.vN`` (``pkg/storage/storage.go`` ``HelmStorageType``).
* CRDs of the chart's ``crds/`` are created when ``upgrade --install`` installs (``pkg/cmd/upgrade.go``: an absent
  release runs ``action.Install``, whose ``installCRDs`` runs unless ``--skip-crds``), never on an upgrade.
* ``show chart CHART --repo R --version V`` prints the chart's ``Chart.yaml`` ("displays the contents of the
  Chart.yaml file", helm/helm v4.2.4 ``pkg/cmd/show.go`` ``showChartDesc``): here apiVersion, name, version,
  appVersion.
* ``pull CHART --repo R --version V --destination D`` writes the chart's archive to ``D/<the basename of its URL
  in the index>`` (helm/helm v4.2.4 ``pkg/downloader/chart_downloader.go`` ``DownloadTo``): these three URLs end in
  ``<chart>-<version>.tgz`` (the indexes of docs/pins.md). The fake's archives are its own (a tar.gz holding
  ``<chart>/Chart.yaml``, byte-for-byte the same on every call), not the publishers': :data:`DIGESTS` holds their
  sha256. ``$FAKE_HELM_TAMPER`` (a chart name) makes that chart's archive differ (a tampered mirror or cache).
* ``repo add NAME URL --repository-config F --repository-cache D`` downloads the repository's index to
  ``D/NAME-index.yaml`` (``pkg/helmpath/home.go`` ``CacheIndexFile``, ``pkg/cmd/repo_add.go``; both flags are
  helm's global flags, ``pkg/cli/environment.go``): here the fake's own index, whose ``digest`` of each entry is the
  sha256 of its archive as helm writes it (``pkg/repo/v1/index.go`` ``IndexDirectory``,
  ``pkg/provenance/sign.go`` ``DigestFile``).
* ``upgrade --install RELEASE ARCHIVE.tgz ...`` installs from a chart archive on disk (its ``Chart.yaml`` names
  the chart and version), as helm does for a local chart path (helm/helm v4.2.4 ``pkg/action/install.go``
  ``ChartPathOptions.LocateChart``: without ``--repo``, a name that exists on disk is that chart).
* Any other chart, version or command fails with helm's own kind of message. ``$FAKE_HELM_LOG`` (when set) gets one
  JSON line per call: its argv and the values files' text. ``$FAKE_HELM_FAIL`` (a chart name) makes that chart's
  install fail as a failed pre-install would.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import ssl
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

VERSION = "v4.2.4+g3900f43"
#: chart -> (repo, the one version published here, the image, where its objects get their name from)
CHARTS = {
    "nvidia-device-plugin": ("https://nvidia.github.io/k8s-device-plugin", "0.20.0"),
    "aws-efa-k8s-device-plugin": ("https://aws.github.io/eks-charts", "v0.5.30"),
    "kuberay-operator": ("https://ray-project.github.io/kuberay-helm/", "1.7.0"),
}
RELEASE_RECORD = "sh.helm.release.v1.{release}.v1"


def chart_yaml(chart: str, version: str) -> dict[str, Any]:
    app = version if chart == "aws-efa-k8s-device-plugin" else version.removeprefix("v")
    return {"apiVersion": "v2", "name": chart, "version": version, "appVersion": app}


def archive_bytes(chart: str, version: str, *, tampered: bool = False) -> bytes:
    """The fake's archive of one chart version: the same bytes on every call (fixed mtimes)."""
    data = yaml.safe_dump(chart_yaml(chart, version), sort_keys=False).encode()
    if tampered:
        data += b"# changed after publication\n"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(f"{chart}/Chart.yaml")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


#: chart -> the sha256 of the fake's archive of its one version (what the fake's index says)
DIGESTS = {c: hashlib.sha256(archive_bytes(c, v)).hexdigest() for c, (_, v) in CHARTS.items()}
#: The settings that pin the fake's archives (versions.*_chart_digest), for tests that install through it.
DIGEST_SETTINGS = {
    "kuberay_chart_digest": DIGESTS["kuberay-operator"],
    "nvidia_device_plugin_chart_digest": DIGESTS["nvidia-device-plugin"],
    "efa_device_plugin_chart_digest": DIGESTS["aws-efa-k8s-device-plugin"],
}


def fullname(release: str, chart: str) -> str:
    return (release if chart in release else f"{release}-{chart}")[:63].rstrip("-")


def _meta(name: str, ns: str, release: str, chart: str, version: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": ns,
        "labels": {
            "app.kubernetes.io/managed-by": "Helm",
            "app.kubernetes.io/name": chart,
            "app.kubernetes.io/instance": release,
            "helm.sh/chart": f"{chart}-{version}",
        },
        "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns},
    }


def _daemonset(md: dict, selector: dict, spec: dict) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": md,
        "spec": {"selector": {"matchLabels": selector}, "template": {"metadata": {"labels": selector}, "spec": spec}},
    }


def _nvidia(release: str, ns: str, version: str, values: dict) -> list[dict]:
    name = fullname(release, "nvidia-device-plugin")
    nfd = [
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
        ("nvidia.com/gpu.present", "true"),
    ]
    default_affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]} for k, v in nfd
                ]
            }
        }
    }
    spec: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "tolerations": values.get(
            "tolerations",
            [
                {"key": "CriticalAddonsOnly", "operator": "Exists"},
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
        ),
        "containers": [
            {
                "name": "nvidia-device-plugin-ctr",
                "image": f"nvcr.io/nvidia/k8s-device-plugin:v{version}",
                # templates/daemonset-device-plugin.yml sets both in the plugin's container
                "env": [
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
                ],
            }
        ],
    }
    strategy = values.get("deviceListStrategy")
    if isinstance(strategy, str):  # daemonset-device-plugin.yml: the env var; _helpers.tpl: SYS_ADMIN for volume-mounts
        ctr = spec["containers"][0]
        ctr["env"] = [{"name": "DEVICE_LIST_STRATEGY", "value": strategy}, *ctr["env"]]  # before the two above
        if "volume-mounts" in strategy:
            ctr["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    affinity = values.get("affinity", default_affinity)  # `affinity: null` removes the chart's default
    if affinity:
        spec["affinity"] = affinity
    if values.get("nodeSelector"):
        spec["nodeSelector"] = values["nodeSelector"]
    selector = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": release}
    return [_daemonset(_meta(name, ns, release, "nvidia-device-plugin", version), selector, spec)]


def _efa(release: str, ns: str, version: str, values: dict) -> list[dict]:
    from tests.fakes.k8s_standin.server import HARDWARE

    name = fullname(release, "aws-efa-k8s-device-plugin")
    allow = sorted(k for k, v in HARDWARE.items() if v[3])
    spec: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "hostNetwork": True,
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *(values.get("tolerations") or [])],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": allow},
                                {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]},
                            ]
                        }
                    ]
                }
            }
        },
        "containers": [
            {
                "name": "aws-efa-k8s-device-plugin",
                "image": "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20",
            }
        ],
    }
    if values.get("nodeSelector"):
        spec["nodeSelector"] = values["nodeSelector"]
    return [_daemonset(_meta(name, ns, release, "aws-efa-k8s-device-plugin", version), {"name": name}, spec)]


def _kuberay(release: str, ns: str, version: str, values: dict) -> list[dict]:
    name = fullname(release, "kuberay-operator")
    labels = {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": release}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "kuberay-operator",
                "image": f"quay.io/kuberay/operator:v{version}",
                "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}},
            }
        ]
    }
    if values.get("nodeSelector"):
        spec["nodeSelector"] = values["nodeSelector"]
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, ns, release, "kuberay-operator", version),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    return [dep]


def kuberay_crds() -> list[dict]:
    """The chart's ``crds/`` (their names and served versions; helm does not template them)."""
    out = []
    for kind in ("RayCluster", "RayCronJob", "RayJob", "RayService"):
        plural = kind.lower() + "s"
        out.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.ray.io"},
                "spec": {
                    "group": "ray.io",
                    "scope": "Namespaced",
                    "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                    "versions": [{"name": "v1", "served": True, "storage": True}],
                },
            }
        )
    return out


RENDER = {"nvidia-device-plugin": _nvidia, "aws-efa-k8s-device-plugin": _efa, "kuberay-operator": _kuberay}


def release_objects(
    release: str, chart: str, ns: str, version: str, values: dict, labels: dict | None = None
) -> list[dict]:
    """What ``helm upgrade --install`` leaves in the cluster for one release: the chart's objects and the release
    record (the CRDs of ``crds/`` aside); ``labels``: the release's own (``--labels``) on the record."""
    # the NVIDIA and KubeRay images are tagged v<chart version>; the EFA chart names its image tag itself
    app_version = version if chart == "aws-efa-k8s-device-plugin" else version.removeprefix("v")
    objects = RENDER[chart](release, ns, app_version, values)
    record = _release_record(release, ns, chart, version, objects)
    record["metadata"]["labels"] = {**(labels or {}), **record["metadata"]["labels"]}
    return [*objects, record]


# ---- the cluster, through the kubeconfig helm was given -------------------------------------------------------


class Api:
    def __init__(self, kubeconfig: str | None, context: str | None):
        path = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        doc = yaml.safe_load(Path(path).read_text())
        name = context or doc.get("current-context")
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == name)
        self.server = next(c["cluster"]["server"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        self.token = next(u["user"].get("token") for u in doc["users"] if u["name"] == ctx["user"])

    def call(self, method: str, path: str, body: dict | None = None) -> dict | None:
        req = urllib.request.Request(self.server + path, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            req.add_header("Content-Type", "application/apply-patch+yaml")
        try:
            with urllib.request.urlopen(req, data=data, timeout=30, context=ssl.create_default_context()) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code == 404 and method in ("GET", "DELETE"):
                return None
            raise SystemExit(f"Error: {method} {path}: {e.code} {e.read().decode()[:300]}") from None
        except urllib.error.URLError as e:
            raise SystemExit(f"Error: Kubernetes cluster unreachable: {e.reason}") from None

    @staticmethod
    def path(obj: dict, *, name: bool = True) -> str:
        group, _, version = obj["apiVersion"].rpartition("/")
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        plural = obj["kind"].lower() + ("es" if obj["kind"].endswith("s") else "s")
        ns = obj["metadata"].get("namespace")
        where = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
        return f"{where}/{obj['metadata']['name']}" if name else where

    def apply(self, obj: dict) -> None:
        self.call("PATCH", self.path(obj) + "?fieldManager=helm&force=true", obj)

    def get(self, obj: dict) -> dict | None:
        return self.call("GET", self.path(obj))

    def delete(self, obj: dict) -> None:
        self.call("DELETE", self.path(obj))


def _release_record(release: str, ns: str, chart: str, version: str, objects: list[dict]) -> dict:
    """Helm keeps each release in its namespace: a ConfigMap with ``HELM_DRIVER=configmap`` (a Secret by default,
    which the stand-in does not serve); the objects it owns are listed here (the real one holds the rendered manifest,
    gzipped)."""
    refs = [{"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"]} for o in objects]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": RELEASE_RECORD.format(release=release),
            "namespace": ns,
            "labels": {"owner": "helm", "name": release, "status": "deployed", "version": "1"},
        },
        "data": {"chart": chart, "version": version, "objects": json.dumps(refs)},
    }


def _opts(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    pos, opts, i = [], {"-f": []}, 0
    flags = {"--install", "--create-namespace", "--short", "--all"}
    while i < len(argv):
        a = argv[i]
        if a in flags:
            opts[a] = True
        elif a == "-f":
            opts["-f"].append(argv[i + 1])
            i += 1
        elif a.startswith("-"):
            opts[a] = argv[i + 1]
            i += 1
        else:
            pos.append(a)
        i += 1
    return pos, opts


def _published(chart: str, repo: str | None, version: str | None) -> int:
    """0 when the fake's repository publishes this chart version, else helm's message and 1."""
    if chart not in CHARTS or repo != CHARTS[chart][0]:
        print(f'Error: chart "{chart}" not found in {repo} repository', file=sys.stderr)
        return 1
    if version != CHARTS[chart][1]:
        print(f'Error: chart "{chart}" matching {version} not found in {repo} index', file=sys.stderr)
        return 1
    return 0


def show_chart(pos: list[str], opts: dict[str, Any]) -> int:
    chart, version = pos[2], opts.get("--version")
    if _published(chart, opts.get("--repo"), version):
        return 1
    print(yaml.safe_dump(chart_yaml(chart, version), sort_keys=False), end="")
    return 0


def pull(pos: list[str], opts: dict[str, Any]) -> int:
    chart, version = pos[1], opts.get("--version")
    if _published(chart, opts.get("--repo"), version):
        return 1
    dest = Path(opts.get("--destination", "."))
    tampered = os.environ.get("FAKE_HELM_TAMPER") == chart
    (dest / f"{chart}-{version}.tgz").write_bytes(archive_bytes(chart, version, tampered=tampered))
    return 0


def repo_add(pos: list[str], opts: dict[str, Any]) -> int:
    name, url = pos[2], pos[3]
    entries = {
        c: [{**chart_yaml(c, v), "digest": DIGESTS[c], "urls": [f"{url.rstrip('/')}/{c}-{v}.tgz"]}]
        for c, (repo, v) in CHARTS.items()
        if repo.rstrip("/") == url.rstrip("/")
    }
    if not entries:
        print(f'Error: looks like "{url}" is not a valid chart repository or cannot be reached', file=sys.stderr)
        return 1
    cache = Path(opts["--repository-cache"])
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"{name}-index.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "entries": entries}))
    Path(opts["--repository-config"]).write_text(yaml.safe_dump({"repositories": [{"name": name, "url": url}]}))
    print(f'"{name}" has been added to your repositories')
    return 0


def _local_chart(path: str) -> tuple[str, str] | None:
    """(name, version) of a chart archive on disk, or None when ``path`` is not one."""
    if not path.endswith(".tgz") or not Path(path).is_file():
        return None
    with tarfile.open(path) as tar:
        meta = next(m for m in tar.getmembers() if m.name.endswith("/Chart.yaml"))
        doc = yaml.safe_load(tar.extractfile(meta).read())
    return doc["name"], doc["version"]


def upgrade_install(pos: list[str], opts: dict[str, Any]) -> int:
    release, chart = pos[1], pos[2]
    ns, version, repo = opts.get("--namespace", "default"), opts.get("--version"), opts.get("--repo")
    local = _local_chart(chart)
    if local:
        (chart, version), repo = local, CHARTS.get(local[0], ("", ""))[0]
    if _published(chart, repo, version):
        return 1
    if os.environ.get("FAKE_HELM_FAIL") == chart:
        print(f"Error: INSTALLATION FAILED: failed pre-install: timed out waiting for {chart}", file=sys.stderr)
        return 1
    values: dict[str, Any] = {}
    for f in opts["-f"]:
        values.update(yaml.safe_load(Path(f).read_text()) or {})
    api = Api(opts.get("--kubeconfig"), opts.get("--kube-context"))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    if api.get(namespace) is None:
        if not opts.get("--create-namespace"):
            print(f'Error: create: failed to create: namespaces "{ns}" not found', file=sys.stderr)
            return 1
        api.apply(namespace)
    record = _release_record(release, ns, chart, version, [])
    old = api.get(record)
    first = old is None
    # --labels: the release's own labels, merged over the old ones on an upgrade (helm/helm v4.2.4
    # pkg/cmd/upgrade.go "Original release labels will be merged with upgrade labels", pkg/action/upgrade.go
    # mergeCustomLabels; pkg/storage/driver/secrets.go newSecretsObject puts them beside helm's own
    # owner/name/status/version)
    labels = {} if first else dict((old.get("metadata") or {}).get("labels") or {})
    labels.update(dict(kv.split("=", 1) for kv in (opts.get("--labels") or "").split(",") if "=" in kv))
    if chart == "kuberay-operator" and first:
        for crd in kuberay_crds():
            if api.get(crd) is None:
                api.apply(crd)
    for obj in release_objects(release, chart, ns, version, values, labels):
        api.apply(obj)
    print(f'Release "{release}" has been {"installed" if first else "upgraded"}. Happy Helming!')
    return 0


def uninstall(pos: list[str], opts: dict[str, Any]) -> int:
    release, ns = pos[1], opts.get("--namespace", "default")
    api = Api(opts.get("--kubeconfig"), opts.get("--kube-context"))
    record = api.get(_release_record(release, ns, "", "", []))
    if record is None:
        print(f"Error: uninstall: Release not loaded: {release}: release: not found", file=sys.stderr)
        return 1
    data = record.get("data") or {}
    for ref in json.loads(data.get("objects", "[]")):
        api.delete(
            {"apiVersion": ref["apiVersion"], "kind": ref["kind"], "metadata": {"name": ref["name"], "namespace": ns}}
        )
    api.delete(record)
    print(f'release "{release}" uninstalled')
    return 0


def list_releases(opts: dict[str, Any]) -> int:
    """``list --all --namespace NS --output json [--selector K=V,...]``: the releases of the namespace whose release
    labels match (helm/helm v4.2.4 pkg/cmd/list.go: ``name``, ``namespace``, ``status``, ``chart`` ...)."""
    ns = opts.get("--namespace", "default")
    api = Api(opts.get("--kubeconfig"), opts.get("--kube-context"))
    items = (api.call("GET", f"/api/v1/namespaces/{ns}/configmaps?labelSelector=owner%3Dhelm") or {}).get("items")
    wanted = dict(kv.split("=", 1) for kv in (opts.get("--selector") or "").split(",") if "=" in kv)
    out = []
    for cm in items or []:
        labels = (cm.get("metadata") or {}).get("labels") or {}
        if labels.get("owner") != "helm" or any(labels.get(k) != v for k, v in wanted.items()):
            continue
        data = cm.get("data") or {}
        chart = f"{data.get('chart', '')}-{data.get('version', '')}"
        out.append({"name": labels.get("name"), "namespace": ns, "status": labels.get("status"), "chart": chart})
    print(json.dumps(out))
    return 0


def main(argv: list[str]) -> int:
    log = os.environ.get("FAKE_HELM_LOG")
    if log:
        vals = [Path(argv[i + 1]).read_text() for i, a in enumerate(argv) if a == "-f" and i + 1 < len(argv)]
        with open(log, "a") as f:
            f.write(json.dumps({"args": argv, "values": vals}) + "\n")
    pos, opts = _opts(argv)
    if pos[:1] == ["version"]:
        print(VERSION)
        return 0
    if pos[:1] == ["upgrade"] and opts.get("--install") and len(pos) == 3:
        return upgrade_install(pos, opts)
    if pos[:1] == ["list"] and opts.get("--output") == "json":
        return list_releases(opts)
    if pos[:1] == ["uninstall"] and len(pos) == 2:
        return uninstall(pos, opts)
    if pos[:2] == ["show", "chart"] and len(pos) == 3:
        return show_chart(pos, opts)
    if pos[:1] == ["pull"] and len(pos) == 2:
        return pull(pos, opts)
    if pos[:2] == ["repo", "add"] and len(pos) == 4:
        return repo_add(pos, opts)
    print(f"Error: the fake helm does not serve {' '.join(argv[:2])!r}", file=sys.stderr)
    return 1


def pin_fake_archives() -> Any:
    """While the fake helm is on PATH, the charts' pinned digests (``versions.*_chart_digest`` left at their
    defaults, the publishers' archives) stand for the fake's archives: in this process (plan.charts.Chart.digest)
    and in processes started from it (the settings' environment variables, for notebook kernels). A digest set to
    anything else, or '' (the index's, which the fake's ``repo add`` serves), is kept. Returns the undo."""
    from raytrain_helpers.core.names import env_var_name
    from raytrain_helpers.core.settings import VersionSettings
    from raytrain_helpers.plan import charts

    original = charts.Chart.digest
    fake = {c.digest_field: DIGESTS[c.chart] for c in charts.CHARTS}

    def digest(self, settings):
        value = original(self, settings)
        default = VersionSettings.model_fields[self.digest_field].default
        return fake[self.digest_field] if value and value == default else value

    charts.Chart.digest = digest
    names = {env_var_name(f): v for f, v in fake.items() if VersionSettings.model_fields[f].default}
    old = {k: os.environ.get(k) for k in names}
    os.environ.update(names)

    def undo() -> None:
        charts.Chart.digest = original
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    return undo


def install(bin_dir: Path, log: Path | None = None) -> Path:
    """Write ``bin_dir/helm`` (this fake, run by this interpreter); returns the folder to put first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "helm"
    env = f"FAKE_HELM_LOG={log} " if log else ""
    exe.write_text(f'#!/bin/sh\n{env}exec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    exe.chmod(0o755)
    return bin_dir


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
