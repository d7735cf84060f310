"""A workshop attendee on a shared EKS cluster (``aws.shared_cluster: true``): only this attendee's namespace.

The cluster, its node groups, the device plugins (DaemonSets in ``kube-system``) and the KubeRay operator belong
to the facilitator, whose folder created them and is the only one that deletes them. For an attendee:

* 02 ``up`` / ``down`` are refused; without an action it reads the cluster's ``status``;
* 03 reads the devices (:func:`.plugins.status`), installs nothing;
* 04 needs the facilitator's operator at ``versions.kuberay_version`` (it never installs one), then applies only
  the attendee's RayCluster and ServiceAccount in the attendee's namespace;
* 08, even with ``assume_yes``, deletes only the attendee's RayCluster, RayJob and ServiceAccount (the namespace
  and its quota are the hand-out's: ``raytrain-tutorial handout teardown``).

Each refusal names the setting, so the message says both why and how to leave the mode.
"""

from __future__ import annotations

from typing import Any

from ....clients import kubernetes as kube
from ....core.settings import Settings
from ....plan.raycluster import NETWORK_POLICIES, RAY_API
from ...base import KubeRayResult, PluginsResult
from .. import eks, gate
from ..kuberay import access
from ..kuberay import raycluster as kuberay
from ..plugins import install as plugins

#: The setting that makes a folder an attendee's.
SETTING = "aws.shared_cluster"


def refusal(settings: Settings, what: str) -> str:
    """Why a cluster-scoped action is refused here, and the fix."""
    return (
        f"refused: {what} is cluster-wide, and this folder is a workshop attendee's on the shared cluster "
        f"{settings.aws.cluster_name} ({SETTING}: true); nothing was changed. Fix: the facilitator does it from "
        f"their own folder (see docs/workshops.md); set {SETTING}: false only in a folder that owns the cluster"
    )


def cluster(settings: Settings, action: str | None = None, *, assume_yes: bool = False) -> eks.AwsClusterResult:
    """02: the gated :func:`.gate.cluster`; for an attendee only ``status`` and ``plan`` (the default: status)."""
    if not settings.aws.shared_cluster:
        return gate.cluster(settings, action, assume_yes=assume_yes)
    if action in ("up", "down"):
        verb = "creating" if action == "up" else "deleting"
        res = eks.AwsClusterResult(action, "(not read)", settings.aws.region, settings.aws.cluster_name)
        res.problems.append(refusal(settings, f"{verb} the EKS cluster (02 `{action}`)"))
        return res
    res = eks.cluster(settings, action or "status")
    res.notes.append(f"shared cluster ({SETTING}: true): the facilitator creates and deletes it")
    return res


def devices(settings: Settings, *, assume_yes: bool = False, **options: Any) -> PluginsResult:
    """03: the device plugins installed and waited for; for an attendee only read."""
    if not settings.aws.shared_cluster:
        return plugins.devices(settings, assume_yes=assume_yes, **options)
    res = plugins.status(settings, client=options.get("client"))
    res.message = "; ".join(
        x
        for x in (f"shared cluster ({SETTING}: true): the device plugins are the facilitator's, only read", res.message)
        if x
    )
    return res


def raycluster(settings: Settings, *, assume_yes: bool = False, client=None, **options: Any) -> KubeRayResult:
    """04: :func:`.kuberay.access.raycluster`; an attendee's needs the facilitator's operator at the pinned version."""
    if settings.aws.shared_cluster:
        want = f"v{settings.versions.kuberay_version}"
        try:
            with kube.using_client(settings, client) as api:
                have = kuberay.operator_version(kuberay.find_operator(api)) or "none"
        except kube.K8sError as e:
            return KubeRayResult("aws", "up", False, str(e))
        if have != want:
            why = refusal(settings, f"installing the KubeRay operator {want} (the cluster has {have})")
            return KubeRayResult("aws", "up", False, why)
    return access.raycluster(settings, assume_yes=assume_yes, client=client, **options)


def teardown(settings: Settings, *, assume_yes: bool = False, nodegroup_only: bool = False) -> eks.AwsTeardownResult:
    """08: :func:`.eks.teardown`; for an attendee only the attendee's own objects in their namespace."""
    if not settings.aws.shared_cluster:
        return eks.teardown(settings, assume_yes=assume_yes, nodegroup_only=nodegroup_only)
    k = settings.kubernetes
    if nodegroup_only:
        return eks.AwsTeardownResult([], refused=refusal(settings, "deleting the GPU node group"))
    if not assume_yes:
        what = f"RayCluster {k.namespace}/{k.ray_cluster_name} and its RayJob"
        return eks.AwsTeardownResult([], refused=f"refused: teardown deletes the {what}. Fix: assume_yes=True")
    return eks.AwsTeardownResult(own_objects_teardown(settings))


def operator(
    settings: Settings, *, client=None, timeout_s: float = 300, poll_s: float = 5.0, log=print
) -> KubeRayResult:
    """``kuberay operator``: only the KubeRay operator at ``versions.kuberay_version``, installed unless it runs
    already, and waited for: what a workshop's facilitator runs instead of 04 (the attendees' RayClusters come from
    their own folders). Refused for an attendee."""
    if settings.aws.shared_cluster:
        return KubeRayResult("aws", "operator", False, refusal(settings, "installing the KubeRay operator"))
    want = f"v{settings.versions.kuberay_version}"
    try:
        with kube.using_client(settings, client) as api:
            have = kuberay.operator_version(kuberay.find_operator(api))
            how = f"already installed ({want})" if have == want else kuberay.install_operator(api, settings, log=log)

            def ready():
                dep = kuberay.find_operator(api)
                return kuberay.deployment_ready(dep) and kuberay.operator_version(dep) == want, dep

            waited = kube.wait_for(ready, timeout_s=timeout_s, interval_s=poll_s)
    except kube.K8sError as e:
        return KubeRayResult("aws", "operator", False, str(e))
    said = f"KubeRay operator {want}: " + ("ready" if waited.ok else f"not ready after {timeout_s:.0f} s")
    return KubeRayResult("aws", "operator", waited.ok, said, install_method=how)


def plugins_teardown(settings: Settings, *, assume_yes: bool = False, **options: Any) -> PluginsResult:
    """``plugins down``: :func:`.plugins.teardown`, refused for an attendee."""
    if settings.aws.shared_cluster:
        return PluginsResult("aws", "teardown", False, refusal(settings, "deleting the device plugins"))
    return plugins.teardown(settings, assume_yes=assume_yes, **options)


def kuberay_teardown(
    settings: Settings, *, assume_yes: bool = False, **options: Any
) -> KubeRayResult | eks.AwsTeardownResult:
    """``kuberay down``: :func:`.kuberay.teardown` (the RayCluster and the operator); for an attendee only the
    attendee's own objects (:func:`teardown`)."""
    if settings.aws.shared_cluster:
        return teardown(settings, assume_yes=assume_yes)
    return kuberay.teardown(settings, assume_yes=assume_yes, **options)


def own_objects(settings: Settings) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of what an attendee's steps create in their namespace."""
    k = settings.kubernetes
    return [
        (RAY_API, "RayJob", f"{k.ray_cluster_name}-job"),
        (RAY_API, "RayCluster", k.ray_cluster_name),
        ("v1", "ServiceAccount", k.service_account),
        *(("networking.k8s.io/v1", "NetworkPolicy", name) for name in NETWORK_POLICIES),
    ]


def own_objects_teardown(settings: Settings, *, client=None, timeout_s: float = 300, poll_s: float = 2.0):
    """Delete :func:`own_objects` and the RayCluster's pods; one row (what, gone, evidence) each, checked by
    reading them back. Nothing outside the attendee's namespace is touched."""
    ns = settings.kubernetes.namespace
    try:
        with kube.using_client(settings, client) as api:
            for api_version, kind, name in own_objects(settings):
                kube.delete(api, api_version, kind, name, ns)

            def left():
                there = [(k, n) for v, k, n in own_objects(settings) if kube.get(api, v, k, n, ns) is not None]
                return not there and not kuberay.cluster_pods(api, settings), there

            waited = kube.wait_for(left, timeout_s=timeout_s, interval_s=poll_s)
    except kube.K8sError as e:
        return [(f"namespace {ns}: RayCluster, RayJob, ServiceAccount", False, str(e))]
    still = dict(waited.value or []) if isinstance(waited.value, list) else {}
    rows = [
        (f"{kind} {ns}/{name}", kind not in still, "deleted, then read back: absent" if kind not in still else "LEFT")
        for _, kind, name in own_objects(settings)
    ]
    note = f"the shared cluster {settings.aws.cluster_name} and namespace {ns}: the facilitator's ({SETTING}: true)"
    return [*rows, ("cluster-wide objects", True, f"not touched: {note}")]


__all__ = [
    "SETTING",
    "cluster",
    "devices",
    "kuberay_teardown",
    "operator",
    "own_objects",
    "own_objects_teardown",
    "plugins_teardown",
    "raycluster",
    "refusal",
    "teardown",
]
