"""The KubeRay operator on aws: found, installed (Helm chart ``kuberay-operator`` pinned to KUBERAY_VERSION when
``helm`` is on PATH, else the rendered manifests plus the release's CRDs) on the system node, its readiness and
image tag read, diagnosed when it is not Ready, and uninstalled by 08 (:func:`.kuberay.teardown`).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from ....clients import helm
from ....clients import kubernetes as kube
from ....core.config import Settings
from ....core.paths import REPO_ROOT
from ....plan.kube_objects import (
    PART_OF,
    PART_OF_LABEL,
    container_of,
    labels,
    match_labels_selector,
    name_of,
    namespace_of,
    pod_problem,
    pod_template_spec,
)
from ....plan.raycluster import KUBERAY_HELM_REPO, OPERATOR_NAMESPACE, OPERATOR_RELEASE, render_operator

CRD_API = "apiextensions.k8s.io/v1"
RAYCLUSTER_CRD = "rayclusters.ray.io"


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


def uninstall_operator(client, log) -> None:
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


__all__ = [
    "CRD_API",
    "RAYCLUSTER_CRD",
    "crd_dir",
    "deployment_ready",
    "diagnose_operator",
    "find_operator",
    "install_crds",
    "install_operator",
    "operator_version",
    "uninstall_operator",
]
