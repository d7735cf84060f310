"""A workshop attendee's namespace on the shared cluster, as Kubernetes itself confines it.

:func:`namespace_objects` renders, for one attendee:

* the Namespace, labelled for the hand-out (``raytrain-tutorial/attendee``) and for Pod Security admission at the
  strictest level the Ray pods meet (:func:`.pod_security.strictest_level` of the rendered RayCluster: ``baseline``
  enforced, ``restricted`` warned and audited; Kubernetes "Pod Security Admission", labels
  ``pod-security.kubernetes.io/<mode>``);
* a ResourceQuota on GPUs, EFA interfaces, CPU, memory, the node disk (``ephemeral-storage``) and pods: what the
  attendee's RayCluster asks for (its pods set requests = limits) plus :data:`HEADROOM` for the odd pod beside it;
  and no NodePort or LoadBalancer Service (``services.nodeports``, ``services.loadbalancers``: 0);
* a LimitRange: a container that states nothing gets a small default (a quota on CPU, memory and ephemeral-storage
  otherwise refuses it), and none may ask for more than one Ray worker pod; the kubelet evicts a pod that writes
  more than its ephemeral-storage limit, so one attendee cannot fill a node and get the operator evicted;
* ValidatingAdmissionPolicies bound to the namespace (:mod:`.workshop_admission`): only ClusterIP Services without
  ``externalIPs``, and RayClusters/RayJobs whose head Service is one;
* a Role (what notebooks 04-08 do in the namespace: the RayCluster and RayJobs, pods, their logs, exec and
  port-forward, the Secrets of the Ray token and the Hugging Face token, NetworkPolicies; quotas read only) and a
  RoleBinding to the attendee's group :func:`attendee_group`; a ClusterRole and ClusterRoleBinding that read what
  04 and 06 read across the cluster (nodes, the KubeRay CRDs and operator Deployment, the device plugin DaemonSets,
  the attendee's own Namespace object) and write nothing.

The attendee's AWS identity reaches that group through an EKS access entry (:func:`access_entry_request`: EKS API
``CreateAccessEntry`` with ``kubernetesGroups``, no access policy: the RoleBinding decides), so the API server itself
keeps them out of every other namespace.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..core.presets import INSTANCE_TYPES
from ..core.settings import Settings
from ..core.validation import ConfigError
from . import pod_security, workshop_admission
from .ray_pods import HEAD_EPHEMERAL_GIB, head_size, worker_ephemeral_gib, worker_size
from .raycluster import OPERATOR_NAMESPACE, render_raycluster

#: The labels of an attendee's namespace the hand-out owns (``handout teardown`` reads them, with the UID it recorded).
MANAGED_BY = ("app.kubernetes.io/managed-by", "raytrain-tutorial")
ATTENDEE_LABEL = "raytrain-tutorial/attendee"
#: Room in the quota beside the RayCluster (a debugging pod, a RayJob's submitter).
HEADROOM = {"cpu": 1, "memory_gib": 2, "ephemeral_gib": 8, "pods": 4}
#: A container that states no resources gets these (the LimitRange's default and defaultRequest).
DEFAULT_CONTAINER = {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"}
#: Namespaces no roster row may claim (with the base namespace and every ``kube-*``).
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", OPERATOR_NAMESPACE)
ROLE = "raytrain-attendee"
#: An IAM role or user (an STS session, ``assumed-role/...``, cannot have an access entry: EKS API reference).
_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")


#: The label (and access entry tag) that names the hand-out an object belongs to: a run name repeats across
#: workshops, a hand-out id does not (``handout`` draws a random one each time it writes the folders).
HANDOUT_LABEL = "raytrain-tutorial/handout"


def attendee_group(settings: Settings, handout_id: str = "") -> str:
    """The Kubernetes group the attendee's access entry puts them in (never ``system:``); unique per hand-out, so
    last workshop's access entry of the same run name is bound to nothing in this one's namespace."""
    return f"raytrain-attendee:{settings.run_name}" + (f":{handout_id}" if handout_id else "")


def cluster_role_name(settings: Settings, handout_id: str = "") -> str:
    """The attendee's ClusterRole and ClusterRoleBinding: unique per hand-out (see :func:`attendee_group`)."""
    return f"{ROLE}-{settings.run_name}" + (f"-{handout_id}" if handout_id else "")


def reserved_namespace_problem(namespace: str, base_namespace: str) -> str | None:
    """Why a roster row may not have this namespace (a system one, the operator's, the base's), or None."""
    if namespace in RESERVED_NAMESPACES or namespace.startswith("kube-") or namespace == base_namespace:
        what = "the base settings' own namespace" if namespace == base_namespace else "a system namespace"
        return (
            f"namespace {namespace!r} is {what}: an attendee's namespace is created for them and deleted with "
            "everything in it. Fix: leave the namespace column out (the hand-out derives <base>-<name>)"
        )
    return None


def ray_pod_level(settings: Settings) -> str:
    """The strictest Pod Security level every pod of the attendee's RayCluster meets."""
    spec = render_raycluster(settings)["spec"]
    pods = [spec["headGroupSpec"]["template"]["spec"], *(g["template"]["spec"] for g in spec["workerGroupSpecs"])]
    return pod_security.strictest_level(pods)


def quota_hard(settings: Settings, gpus: int) -> dict[str, str]:
    """The namespace's ResourceQuota: the RayCluster's pods (requests = limits) plus :data:`HEADROOM`."""
    a = settings.aws
    head, worker = head_size(settings), worker_size(settings)
    cpu = head.cpu + a.gpu_node_count * worker.cpu + HEADROOM["cpu"]
    mem = head.memory_gib + a.gpu_node_count * worker.memory_gib + HEADROOM["memory_gib"]
    disk = HEAD_EPHEMERAL_GIB + a.gpu_node_count * worker_ephemeral_gib(settings) + HEADROOM["ephemeral_gib"]
    efa = a.gpu_node_count * int(INSTANCE_TYPES[a.gpu_node_type]["efa"])
    hard = {
        "requests.nvidia.com/gpu": str(gpus),
        "requests.vpc.amazonaws.com/efa": str(efa),
        "pods": str(1 + a.gpu_node_count + HEADROOM["pods"]),
        # no Service reachable from outside the cluster (the admission policy refuses them too)
        "services.nodeports": "0",
        "services.loadbalancers": "0",
    }
    for kind in ("requests", "limits"):
        hard[f"{kind}.cpu"], hard[f"{kind}.memory"] = str(cpu), f"{mem}Gi"
        hard[f"{kind}.ephemeral-storage"] = f"{disk}Gi"
    return hard


def namespace_objects(settings: Settings, gpus: int, handout_id: str = "") -> list[dict[str, Any]]:
    """Every object of the attendee's namespace (see the module's docstring), in apply order; ``handout_id``
    names the hand-out in every object's labels and in the group and ClusterRole names."""
    ns = settings.kubernetes.namespace
    if gpus < 0:
        raise ConfigError("--gpus-per-attendee must not be negative. Fix: leave it out (computed)")
    labels = {MANAGED_BY[0]: MANAGED_BY[1], ATTENDEE_LABEL: settings.run_name}
    if handout_id:
        labels[HANDOUT_LABEL] = handout_id
    level = ray_pod_level(settings)
    psa = {f"pod-security.kubernetes.io/{mode}": level for mode in ("enforce",)}
    psa.update({f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("warn", "audit")})
    worker = worker_size(settings)
    meta = {"namespace": ns, "labels": labels}
    group = {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": attendee_group(settings, handout_id)}
    cluster_role = cluster_role_name(settings, handout_id)
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {**labels, **psa}}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "attendee-quota", **meta},
         "spec": {"hard": quota_hard(settings, gpus)}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "attendee-limits", **meta},
         "spec": {"limits": [{"type": "Container", "default": dict(DEFAULT_CONTAINER),
                              "defaultRequest": dict(DEFAULT_CONTAINER),
                              "max": {"cpu": str(max(worker.cpu, head_size(settings).cpu)),
                                      "memory": f"{max(worker.memory_gib, head_size(settings).memory_gib)}Gi",
                                      "ephemeral-storage":
                                          f"{max(worker_ephemeral_gib(settings), HEAD_EPHEMERAL_GIB)}Gi"}}]}},
        # before the Role: the attendee never holds write access without the policies in force
        *workshop_admission.admission_objects(settings, cluster_role, labels),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": ROLE, **meta},
         "rules": _namespace_rules()},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": ROLE, **meta},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE}, "subjects": [group]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": cluster_role, "labels": labels}, "rules": _cluster_read_rules(ns)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": cluster_role, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
         "subjects": [group]},
    ]  # fmt: skip
    return json.loads(json.dumps(objects))  # no object shares a dict with another (plain YAML, no anchors)


_ALL = ["get", "list", "watch", "create", "update", "patch", "delete"]
_READ = ["get", "list", "watch"]


def _namespace_rules() -> list[dict[str, Any]]:
    return [
        {"apiGroups": ["ray.io"], "resources": ["rayclusters", "rayjobs", "rayclusters/status", "rayjobs/status"],
         "verbs": _ALL},
        {"apiGroups": [""], "resources": ["pods", "services", "serviceaccounts", "configmaps", "secrets"],
         "verbs": _ALL},
        {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["pods/log", "events", "resourcequotas", "limitranges"], "verbs": _READ},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": _ALL},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _READ},
    ]  # fmt: skip


def _cluster_read_rules(namespace: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": _READ},
        {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": [namespace], "verbs": ["get"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": _READ},
        {"apiGroups": ["apps"], "resources": ["deployments", "daemonsets"], "verbs": _READ},
    ]


def check_principal(principal_arn: str) -> None:
    """Refuse what cannot have an EKS access entry (an STS session, a malformed ARN)."""
    if not _PRINCIPAL_ARN.match(principal_arn or ""):
        raise ConfigError(
            f"principal_arn = {principal_arn!r} is not an IAM role or user ARN. Fix: the attendee's own role, e.g. "
            "arn:aws:iam::123456789012:role/workshop-ann (never the facilitator's)"
        )


def access_entry_request(settings: Settings, principal_arn: str, handout_id: str = "") -> dict[str, Any]:
    """The EKS ``CreateAccessEntry`` request that maps the attendee's IAM role or user to their group (botocore's
    ``eks`` model: clusterName, principalArn, kubernetesGroups, type, tags). No access policy is associated: the
    Role and RoleBinding of :func:`namespace_objects` are all the attendee may do. The tags name the hand-out:
    ``handout teardown`` deletes only an entry that carries them."""
    check_principal(principal_arn)
    tags = {"raytrain-tutorial": settings.aws.cluster_name, ATTENDEE_LABEL: settings.run_name}
    if handout_id:
        tags[HANDOUT_LABEL] = handout_id
    return {
        "clusterName": settings.aws.cluster_name,
        "principalArn": principal_arn,
        "kubernetesGroups": [attendee_group(settings, handout_id)],
        "type": "STANDARD",
        "tags": tags,
    }


__all__ = [
    "ATTENDEE_LABEL",
    "DEFAULT_CONTAINER",
    "HANDOUT_LABEL",
    "HEADROOM",
    "MANAGED_BY",
    "RESERVED_NAMESPACES",
    "ROLE",
    "access_entry_request",
    "attendee_group",
    "check_principal",
    "cluster_role_name",
    "namespace_objects",
    "quota_hard",
    "ray_pod_level",
    "reserved_namespace_problem",
]
