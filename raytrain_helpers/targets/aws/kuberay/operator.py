"""The KubeRay operator on aws: found, installed with Helm (ray-project's chart ``kuberay-operator`` pinned to
KUBERAY_VERSION, which brings the operator's RBAC and the ray.io CRDs) on the system node, its readiness and image
tag read, diagnosed when it is not Ready, and uninstalled by 08 (:func:`.raycluster.teardown`).
"""

from __future__ import annotations

from ....clients import helm
from ....clients import kubernetes as kube
from ....core.config import Settings
from ....plan import charts
from ....plan.kube_objects import (
    container_of,
    labels,
    match_labels_selector,
    name_of,
    namespace_of,
    pod_problem,
    pod_template_spec,
)
from ....plan.raycluster import (
    KUBERAY_HELM_REPO,
    OPERATOR_CHART,
    OPERATOR_NAMESPACE,
    OPERATOR_RELEASE,
    operator_helm_values,
)

CRD_API = "apiextensions.k8s.io/v1"
RAYCLUSTER_CRD = "rayclusters.ray.io"


def find_operator(client) -> dict | None:
    """The KubeRay operator Deployment (any namespace), or None."""
    deps = kube.list_objects(
        client, "apps/v1", "Deployment", None, label_selector="app.kubernetes.io/name=kuberay-operator"
    )
    return deps[0] if deps else None


def install_operator(client, settings: Settings, *, log=print) -> str:
    """``helm upgrade --install`` of the pinned chart (idempotent); returns how."""
    version = settings.versions.kuberay_version
    helm.upgrade_install(
        client,
        release=OPERATOR_RELEASE,
        chart=OPERATOR_CHART,
        repo=KUBERAY_HELM_REPO,
        version=version,
        digest=charts.BY_NAME[OPERATOR_CHART].digest(settings),
        digest_fix=charts.digest_fix(charts.BY_NAME[OPERATOR_CHART]),
        namespace=OPERATOR_NAMESPACE,
        values=operator_helm_values(settings),
        create_namespace=True,
    )
    log(f"helm: {OPERATOR_CHART} {version} installed in {OPERATOR_NAMESPACE} as release {OPERATOR_RELEASE}")
    return f"helm chart {OPERATOR_CHART} {version}"


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


def is_tutorial_release(dep: dict | None) -> bool:
    """The operator Deployment is the tutorial's Helm release (labelled by Helm, annotated with the release)."""
    annotations = ((dep or {}).get("metadata") or {}).get("annotations") or {}
    return (
        labels(dep or {}).get("app.kubernetes.io/managed-by") == "Helm"
        and annotations.get("meta.helm.sh/release-name") == OPERATOR_RELEASE
    )


def uninstall_operator(client, log) -> None:
    """``helm uninstall`` of the tutorial's release; an operator that is not that release (someone else's) is kept.
    The CRDs stay: Helm never deletes a chart's ``crds/`` (``eksctl delete cluster`` does)."""
    operator = find_operator(client)
    if operator is None:
        return
    if not is_tutorial_release(operator):
        log(f"KubeRay operator {namespace_of(operator)}/{name_of(operator)} kept: not the tutorial's Helm release")
        return
    namespace = namespace_of(operator) or OPERATOR_NAMESPACE
    helm.uninstall(client, OPERATOR_RELEASE, namespace)
    log(f"helm uninstall {OPERATOR_RELEASE} -n {namespace}")


__all__ = [
    "CRD_API",
    "RAYCLUSTER_CRD",
    "deployment_ready",
    "diagnose_operator",
    "find_operator",
    "install_operator",
    "is_tutorial_release",
    "operator_version",
    "uninstall_operator",
]
