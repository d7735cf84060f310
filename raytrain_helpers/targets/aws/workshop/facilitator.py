"""A workshop seen from the facilitator's folder: each attendee's namespace created (``handout namespaces``: never
one that exists already), their RayCluster and last RayJob read from the shared cluster, and the namespace removed
(``handout teardown``: only the very namespace the hand-out created, known by the UID the API server gave it)."""

from __future__ import annotations

from ....clients import kubernetes as kube
from ....core.settings import Settings
from ....plan.raycluster import RAY_API
from ....plan.workshop_namespace import ATTENDEE_LABEL, MANAGED_BY

#: The admission policies' kinds (plan.workshop_admission), bindings first: the order to delete them in.
ADMISSION_KINDS = ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy")


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


def create_namespace(settings: Settings, objects: list[dict], *, uid: str = "", client=None) -> tuple[bool, str, str]:
    """Create the attendee's Namespace and apply ``objects`` (its quota, limits and RBAC; the Namespace first).
    A namespace that exists already is refused unless it is the one this hand-out created (its UID is ``uid``):
    the hand-out never takes over a namespace someone else made. (done, what happened, the namespace's UID)."""
    ns = settings.kubernetes.namespace
    try:
        with kube.using_client(settings, client) as api:
            live = kube.get(api, "v1", "Namespace", ns)
            have = ((live or {}).get("metadata") or {}).get("uid", "")
            if live is not None and (not uid or have != uid):
                return (
                    False,
                    (
                        f"namespace {ns} exists already and is not the one this hand-out created: left alone, nothing "
                        f"applied. Fix: a roster row with another name (or namespace column), or delete {ns} if it is "
                        "a leftover you own"
                    ),
                    "",
                )
            for obj in objects:
                kube.apply(api, obj)
            made = kube.get(api, "v1", "Namespace", ns) or {}
    except kube.K8sError as e:
        return False, f"namespace {ns}: {e}", ""
    new_uid = (made.get("metadata") or {}).get("uid", "")
    said = "created" if live is None else "already created by this hand-out"
    return True, f"namespace {ns}: {said}, {len(objects) - 1} object(s) applied in it (uid {new_uid})", new_uid


def remove_namespace(
    settings: Settings,
    *,
    assume_yes: bool = False,
    uid: str = "",
    objects: list[dict] = (),  # type: ignore[assignment]
    client=None,
    timeout_s: float = 300,
    poll_s: float = 2.0,
) -> tuple[bool, str]:
    """Delete the attendee's Namespace (with everything in it), the cluster-scoped ``objects`` of the hand-out's
    record (the ClusterRole and ClusterRoleBinding, each only while it carries the recorded labels) and, once the
    namespace is gone, their admission policies (:mod:`...plan.workshop_admission`), when it is the very namespace
    ``handout namespaces`` created (UID ``uid``, and the hand-out's labels); any other namespace of that name,
    labelled or not, is left alone. (done, what happened); idempotent."""
    ns = settings.kubernetes.namespace
    if not assume_yes:
        return False, f"refused: deletes namespace {ns} and everything in it. Fix: --yes"
    try:
        with kube.using_client(settings, client) as api:
            obj = kube.get(api, "v1", "Namespace", ns)
            if obj is None:
                return True, f"namespace {ns}: absent (nothing to delete)"
            md = obj.get("metadata") or {}
            labels = md.get("labels") or {}
            ours = labels.get(MANAGED_BY[0]) == MANAGED_BY[1] and labels.get(ATTENDEE_LABEL) == settings.run_name
            if not uid or md.get("uid") != uid or not ours:
                return False, (
                    f"namespace {ns} is not the one `handout namespaces` created for {settings.run_name} "
                    f"({'no record of its creation' if not uid else 'another UID or labels'}): left alone. "
                    f"Fix: delete it yourself if it is this attendee's (kubectl delete namespace {ns})"
                )
            policies = sorted(
                (o for o in objects if o.get("kind") in ADMISSION_KINDS), key=lambda o: ADMISSION_KINDS.index(o["kind"])
            )
            kept = _delete_cluster_scoped(api, [o for o in objects if o.get("kind") not in ADMISSION_KINDS])
            kube.delete(api, "v1", "Namespace", ns)
            gone = kube.wait_for(
                lambda: (kube.get(api, "v1", "Namespace", ns) is None, None), timeout_s=timeout_s, interval_s=poll_s
            )
            if gone.ok:  # the admission policies last as long as anything in the namespace could use a Service
                kept += _delete_cluster_scoped(api, policies)
    except kube.K8sError as e:
        return False, f"namespace {ns}: {e}"
    said = f"namespace {ns}: " + ("deleted, then read back: absent" if gone.ok else "still terminating")
    return gone.ok and not kept, said + "".join(f"; {k}" for k in kept)


def _delete_cluster_scoped(api, objects) -> list[str]:
    """Delete each cluster-scoped object of the record (no namespace in its metadata) whose live labels are the
    recorded ones; what was left alone, said."""
    kept = []
    for obj in objects:
        md = obj.get("metadata") or {}
        if md.get("namespace") or obj.get("kind") == "Namespace":
            continue
        live = kube.get(api, obj["apiVersion"], obj["kind"], md["name"])
        if live is None:
            continue
        have = (live.get("metadata") or {}).get("labels") or {}
        if any(have.get(k) != v for k, v in (md.get("labels") or {}).items()):
            kept.append(f"{obj['kind']} {md['name']} lacks the hand-out's labels: left alone")
            continue
        kube.delete(api, obj["apiVersion"], obj["kind"], md["name"])
    return kept


__all__ = ["ADMISSION_KINDS", "ATTENDEE_LABEL", "MANAGED_BY", "attendee_state", "create_namespace", "remove_namespace"]
