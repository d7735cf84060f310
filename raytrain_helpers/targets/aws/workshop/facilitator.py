"""A workshop seen from the facilitator's folder: each attendee's RayCluster and last RayJob read from the shared
cluster, and each attendee's namespace removed (only the ones the hand-out labelled for that attendee)."""

from __future__ import annotations

from ....clients import kubernetes as kube
from ....core.settings import Settings
from ....plan.raycluster import RAY_API

#: The labels ``raytrain-tutorial handout`` puts on an attendee's Namespace (and nothing else carries both).
MANAGED_BY = ("app.kubernetes.io/managed-by", "raytrain-tutorial")
ATTENDEE_LABEL = "raytrain-tutorial/attendee"


def attendee_state(settings: Settings, *, client=None) -> dict[str, str]:
    """``cluster``: the attendee's RayCluster (``status.state``, or absent); ``job``: their newest RayJob's
    ``status.jobStatus``, else ``-``. An unreachable API is said in both."""
    k = settings.kubernetes
    try:
        with kube.using_client(settings, client) as api:
            rc = kube.get(api, RAY_API, "RayCluster", k.ray_cluster_name, k.namespace)
            jobs = kube.list_objects(api, RAY_API, "RayJob", k.namespace)
    except kube.K8sError as e:
        return dict(cluster=f"unreadable: {str(e)[:80]}", job="unreadable")
    cluster = "absent" if rc is None else ((rc.get("status") or {}).get("state") or "created")
    jobs.sort(key=lambda j: (j.get("metadata") or {}).get("creationTimestamp") or "")
    job = "-"
    if jobs:
        st = jobs[-1].get("status") or {}
        job = f"{jobs[-1]['metadata']['name']}: {st.get('jobStatus') or st.get('jobDeploymentStatus') or 'created'}"
    return dict(cluster=cluster, job=job)


def remove_namespace(
    settings: Settings, *, assume_yes: bool = False, client=None, timeout_s: float = 300, poll_s: float = 2.0
) -> tuple[bool, str]:
    """Delete the attendee's Namespace (with everything in it) when the hand-out's labels say it is this
    attendee's; any other namespace of that name is left alone. (done, what happened); idempotent."""
    ns = settings.kubernetes.namespace
    if not assume_yes:
        return False, f"refused: deletes namespace {ns} and everything in it. Fix: --yes"
    try:
        with kube.using_client(settings, client) as api:
            obj = kube.get(api, "v1", "Namespace", ns)
            if obj is None:
                return True, f"namespace {ns}: absent (nothing to delete)"
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if labels.get(MANAGED_BY[0]) != MANAGED_BY[1] or labels.get(ATTENDEE_LABEL) != settings.run_name:
                return False, (
                    f"namespace {ns} is not labelled {ATTENDEE_LABEL}={settings.run_name} by the hand-out: left alone. "
                    f"Fix: delete it yourself if it is this attendee's (kubectl delete namespace {ns})"
                )
            kube.delete(api, "v1", "Namespace", ns)
            gone = kube.wait_for(
                lambda: (kube.get(api, "v1", "Namespace", ns) is None, None), timeout_s=timeout_s, interval_s=poll_s
            )
    except kube.K8sError as e:
        return False, f"namespace {ns}: {e}"
    return gone.ok, f"namespace {ns}: " + ("deleted, then read back: absent" if gone.ok else "still terminating")


__all__ = ["ATTENDEE_LABEL", "MANAGED_BY", "attendee_state", "remove_namespace"]
