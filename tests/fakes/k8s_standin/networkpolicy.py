"""Which ingress the NetworkPolicies of a namespace admit, decided as Kubernetes defines it (test-only).

It follows the API's own definition, kubernetes/api ``networking/v1/types.go`` (the field comments of
``NetworkPolicySpec``, ``NetworkPolicyIngressRule``, ``NetworkPolicyPeer``, ``NetworkPolicyPort``) and
``meta/v1`` ``LabelSelector``, as the Kubernetes documentation "Network Policies" explains them:

* a pod is isolated for ingress when some policy of its namespace selects it (``podSelector``; ``{}`` selects
  every pod) with ``Ingress`` in ``policyTypes`` (left out: ``Ingress``, plus ``Egress`` when egress rules exist);
  an isolated pod admits a connection only when some policy selecting it has an ingress rule admitting it (the
  policies add up), a pod no policy selects admits everything;
* a rule admits a source when its ``from`` is empty or one peer matches, and the port when its ``ports`` is empty
  or one entry matches (protocol TCP when left out; ``endPort`` makes a range); a peer with ``podSelector`` alone
  means pods of the policy's own namespace, ``namespaceSelector`` alone every pod of the namespaces it selects,
  both together the pods it selects in those namespaces;
* a label selector needs every ``matchLabels`` pair and every ``matchExpressions`` entry (``In``, ``NotIn``,
  ``Exists``, ``DoesNotExist``); ``{}`` matches everything. A namespace carries ``kubernetes.io/metadata.name``
  (set by the API server, Kubernetes >= 1.22).

Not modelled (refused when met): ``ipBlock`` peers and named ports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Pod:
    namespace: str
    labels: dict[str, str]
    name: str = ""
    namespace_labels: dict[str, str] = field(default_factory=dict)

    def ns_labels(self) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": self.namespace, **self.namespace_labels}


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """meta/v1 LabelSelector: matchLabels and matchExpressions, all of them; an empty selector matches all."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _policy_types(spec: dict[str, Any]) -> list[str]:
    return spec.get("policyTypes") or (["Ingress"] + (["Egress"] if spec.get("egress") else []))


def selects(policy: dict[str, Any], pod: Pod) -> bool:
    """Whether ``policy`` isolates ``pod`` for ingress."""
    spec = policy.get("spec") or {}
    return (
        policy["metadata"].get("namespace") == pod.namespace
        and "Ingress" in _policy_types(spec)
        and selector_matches(spec.get("podSelector"), pod.labels)
    )


def _peer_matches(peer: dict[str, Any], policy_ns: str, source: Pod) -> bool:
    if "ipBlock" in peer:
        raise NotImplementedError("ipBlock peers are not modelled")
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"], source.ns_labels()):
            return False
    elif source.namespace != policy_ns:
        return False
    return "podSelector" not in peer or selector_matches(peer["podSelector"], source.labels)


def _port_matches(entry: dict[str, Any], protocol: str, port: int) -> bool:
    if entry.get("protocol", "TCP") != protocol:
        return False
    if "port" not in entry:
        return True
    if not isinstance(entry["port"], int):
        raise NotImplementedError("named ports are not modelled")
    return entry["port"] <= port <= entry.get("endPort", entry["port"])


def rule_admits(rule: dict[str, Any], policy_ns: str, source: Pod, port: int, protocol: str = "TCP") -> bool:
    peers, ports = rule.get("from") or [], rule.get("ports") or []
    peer_ok = not peers or any(_peer_matches(p, policy_ns, source) for p in peers)
    port_ok = not ports or any(_port_matches(p, protocol, port) for p in ports)
    return peer_ok and port_ok


def admits(policies: list[dict[str, Any]], source: Pod, dest: Pod, port: int, protocol: str = "TCP") -> bool:
    """Whether a connection from ``source`` to ``dest`` on ``port`` is admitted by the ingress side."""
    isolating = [p for p in policies if selects(p, dest)]
    if not isolating:
        return True
    return any(
        rule_admits(rule, p["metadata"]["namespace"], source, port, protocol)
        for p in isolating
        for rule in (p.get("spec") or {}).get("ingress") or []
    )
