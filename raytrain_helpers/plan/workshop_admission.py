"""What the API server refuses in a workshop attendee's namespace, whoever asks (the attendee, or the KubeRay
operator on their behalf): ValidatingAdmissionPolicies and their bindings (``admissionregistration.k8s.io/v1``,
GA since Kubernetes 1.30, built into every EKS version the tutorial allows).

* **Services**: only ``type: ClusterIP``, and no ``spec.externalIPs``. A Service whose ``externalIPs`` names an
  address it does not own makes kube-proxy on every node send that address's traffic to the Service's pods
  (CVE-2020-8554, kubernetes/kubernetes#97076): the EKS Pod Identity agent's 169.254.170.23, or another
  attendee's head. Kubernetes' own fix is the ``DenyServiceExternalIPs`` admission plugin, which EKS does not let
  a cluster turn on (EKS chooses the API server's plugins: aws/containers-roadmap#739); this policy is the same
  rule, for the attendees' namespaces only. NodePort and LoadBalancer Services would open the attendee's head
  outside the cluster (and the quota says 0 of each as well: ``services.nodeports``, ``services.loadbalancers``,
  :mod:`.workshop_namespace`).
* **RayClusters** and **RayJobs** (``rayClusterSpec``): the head Service the operator creates for them
  (``headGroupSpec.serviceType``, ``headGroupSpec.headService``: a whole Service, KubeRay v1.7.0 CRD) under the
  same rule, and no ``headGroupSpec.enableIngress`` (an Ingress the operator would create for the dashboard). The
  Service policy refuses such a Service anyway when the operator creates it; this one refuses the RayCluster
  itself, with a message the attendee sees at ``kubectl apply``.

Each binding selects the attendee's namespace by its ``kubernetes.io/metadata.name`` label, which the API server
sets on every Namespace and nobody can change (NamespaceDefaultLabelName, Kubernetes >= 1.22); the attendee cannot
write Namespaces at all (their ClusterRole only reads their own). The CEL uses only what the Kubernetes CEL
environment and the tests' CEL implementation (cel-python) both have: ``has()``, ``size()``, ``&&``/``||``, and
the policy's ``variables``; no optional types (``.?``), which cel-python does not parse.
"""

from __future__ import annotations

from typing import Any

from ..core.settings import Settings

API = "admissionregistration.k8s.io/v1"
#: The label the API server puts on every Namespace: its own name (immutable).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

#: The rule on a Service spec, as CEL over ``variables.svc`` (the Service's ``spec``).
_SERVICE_SPEC_RULES = [
    (
        "!has(variables.svc.type) || variables.svc.type == 'ClusterIP'",
        "only ClusterIP Services are allowed in a workshop attendee's namespace (no NodePort, LoadBalancer or "
        "ExternalName). Fix: leave spec.type out",
    ),
    (
        "!has(variables.svc.externalIPs) || size(variables.svc.externalIPs) == 0",
        "spec.externalIPs is refused in a workshop attendee's namespace: it would redirect another address's "
        "traffic to these pods (CVE-2020-8554). Fix: leave spec.externalIPs out",
    ),
]

#: The rules on a RayCluster spec, as CEL over ``variables.head`` (its ``headGroupSpec``).
_HEAD_RULES = [
    (
        "!has(variables.head.serviceType) || variables.head.serviceType == 'ClusterIP'",
        "headGroupSpec.serviceType must be ClusterIP in a workshop attendee's namespace. Fix: leave it out",
    ),
    (
        "!has(variables.head.headService) || !has(variables.head.headService.spec) || "
        "!has(variables.head.headService.spec.type) || variables.head.headService.spec.type == 'ClusterIP'",
        "headGroupSpec.headService.spec.type must be ClusterIP in a workshop attendee's namespace. Fix: leave it out",
    ),
    (
        "!has(variables.head.headService) || !has(variables.head.headService.spec) || "
        "!has(variables.head.headService.spec.externalIPs) || size(variables.head.headService.spec.externalIPs) == 0",
        "headGroupSpec.headService.spec.externalIPs is refused in a workshop attendee's namespace (CVE-2020-8554). "
        "Fix: leave it out",
    ),
    (
        "!has(variables.head.enableIngress) || !variables.head.enableIngress",
        "headGroupSpec.enableIngress is refused in a workshop attendee's namespace: the dashboard stays inside the "
        "cluster. Fix: leave it out (kubectl port-forward reaches it)",
    ),
]

#: name suffix -> (API group, resource, variables, matchConditions, rules).
POLICIES: dict[str, tuple[str, str, list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]] = {
    "services": ("", "services", [("svc", "object.spec")], [], _SERVICE_SPEC_RULES),
    "rayclusters": ("ray.io", "rayclusters", [("head", "object.spec.headGroupSpec")], [], _HEAD_RULES),
    "rayjobs": (
        "ray.io",
        "rayjobs",
        [("head", "object.spec.rayClusterSpec.headGroupSpec")],
        # a RayJob that runs on an existing RayCluster (clusterSelector) has no rayClusterSpec: nothing to check
        [("has-cluster-spec", "has(object.spec.rayClusterSpec)")],
        _HEAD_RULES,
    ),
}


def policy_name(base: str, suffix: str) -> str:
    """The name of one policy (and of its binding) of an attendee: ``<base>-<suffix>``."""
    return f"{base}-{suffix}"


def admission_objects(settings: Settings, base: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The attendee's ValidatingAdmissionPolicies and bindings (cluster-scoped), named ``<base>-<suffix>``, each
    binding limited to the attendee's namespace. Apply them before the attendee's Role: no moment without them."""
    ns = settings.kubernetes.namespace
    objects: list[dict[str, Any]] = []
    for suffix, (group, resource, variables, conditions, rules) in POLICIES.items():
        name = policy_name(base, suffix)
        spec: dict[str, Any] = {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": ["*"],
                        "resources": [resource],
                        "operations": ["CREATE", "UPDATE"],
                    }
                ]
            },
            "variables": [{"name": n, "expression": e} for n, e in variables],
            "validations": [{"expression": e, "message": m, "reason": "Forbidden"} for e, m in rules],
        }
        if conditions:
            spec["matchConditions"] = [{"name": n, "expression": e} for n, e in conditions]
        objects.append({"apiVersion": API, "kind": "ValidatingAdmissionPolicy",
                        "metadata": {"name": name, "labels": dict(labels)}, "spec": spec})  # fmt: skip
        objects.append(
            {
                "apiVersion": API,
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name, "labels": dict(labels)},
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: ns}}},
                },
            }
        )
    return objects


def admission_kinds(base: str) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of :func:`admission_objects`, bindings first (the order to delete them in)."""
    rows = [(API, "ValidatingAdmissionPolicyBinding", policy_name(base, s)) for s in POLICIES]
    return rows + [(API, "ValidatingAdmissionPolicy", policy_name(base, s)) for s in POLICIES]


__all__ = ["API", "NAMESPACE_NAME_LABEL", "POLICIES", "admission_kinds", "admission_objects", "policy_name"]
