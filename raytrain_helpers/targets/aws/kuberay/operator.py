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
from .. import ownership

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
    if ownership.release_state(client, OPERATOR_RELEASE, OPERATOR_NAMESPACE, settings) == ownership.NOT_OURS:
        raise kube.K8sError(
            ownership.not_ours(
                f"Helm release {OPERATOR_RELEASE} in namespace {OPERATOR_NAMESPACE}", settings, "release label"
            )
            + f": it is not upgraded to kuberay-operator {version}. Fix: upgrade that release to {version} yourself "
            f"(the RayCluster needs the operator at versions.kuberay_version), or set versions.kuberay_version to "
            f"the version it runs"
        )
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
        labels=ownership.helm_labels(settings),
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


def operator_is_ours(client, settings: Settings, operator: dict | None) -> bool:
    """The operator Deployment is the tutorial's Helm release and that release carries the tutorial's label for this
    cluster (:func:`..ownership.release_state`)."""
    if not is_tutorial_release(operator):
        return False
    namespace = namespace_of(operator or {}) or OPERATOR_NAMESPACE
    return ownership.release_state(client, OPERATOR_RELEASE, namespace, settings) == ownership.OURS


def uninstall_operator(client, log, settings: Settings) -> bool:
    """``helm uninstall`` of the tutorial's release; an operator that is not that release (someone else's) is kept,
    and said. The CRDs stay: Helm never deletes a chart's ``crds/`` (``eksctl delete cluster`` does). Returns
    whether it uninstalled."""
    operator = find_operator(client)
    if operator is None:
        return False
    if not operator_is_ours(client, settings, operator):
        log(
            ownership.not_ours(
                f"KubeRay operator {namespace_of(operator)}/{name_of(operator)} (Helm release "
                f"{helm_release_name(operator) or 'none'})",
                settings,
                "release label",
            )
        )
        return False
    namespace = namespace_of(operator) or OPERATOR_NAMESPACE
    helm.uninstall(client, OPERATOR_RELEASE, namespace)
    log(f"helm uninstall {OPERATOR_RELEASE} -n {namespace}")
    return True


def helm_release_name(dep: dict | None) -> str:
    return (((dep or {}).get("metadata") or {}).get("annotations") or {}).get("meta.helm.sh/release-name", "")


__all__ = [
    "CRD_API",
    "RAYCLUSTER_CRD",
    "deployment_ready",
    "diagnose_operator",
    "find_operator",
    "install_operator",
    "helm_release_name",
    "is_tutorial_release",
    "operator_is_ours",
    "operator_version",
    "uninstall_operator",
]
