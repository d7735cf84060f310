"""Facts read from Kubernetes objects held as plain dicts: quantities, labels, containers, node and pod state,
taints against tolerations, node selectors against labels. No API calls: the callers list the objects.
"""

from __future__ import annotations

from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
#: ``app.kubernetes.io/part-of`` of every object the tutorial creates.
PART_OF = "raytrain-tutorial"
PART_OF_LABEL = "app.kubernetes.io/part-of"


def quantity(value: Any) -> float:
    """A Kubernetes quantity ('4', '500m', '16Gi') as a number (cores, bytes, count)."""
    if value is None:
        return 0.0
    from kubernetes.utils import parse_quantity

    return float(parse_quantity(str(value)))


def labels(obj: dict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def name_of(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "?")


def namespace_of(obj: dict) -> str | None:
    return (obj.get("metadata") or {}).get("namespace")


def is_part_of_tutorial(obj: dict | None) -> bool:
    """Whether the object carries the tutorial's ``app.kubernetes.io/part-of`` label."""
    return obj is not None and labels(obj).get(PART_OF_LABEL) == PART_OF


def phase_of(pod: dict) -> str | None:
    return (pod.get("status") or {}).get("phase")


def pod_template_spec(obj: dict) -> dict:
    """``spec.template.spec`` of a workload (DaemonSet, Deployment)."""
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def match_labels_selector(obj: dict) -> str:
    """A workload's ``spec.selector.matchLabels`` as a label selector string (``k=v,k2=v2``)."""
    match = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in match.items())


def container_of(pod_spec: dict, name: str | None = None) -> dict:
    """The container called ``name`` of a pod spec, else its first container ({} if none)."""
    containers = (pod_spec or {}).get("containers") or []
    if name:
        for c in containers:
            if c.get("name") == name:
                return c
    return containers[0] if containers else {}


def env_of(container: dict) -> dict[str, str]:
    """A container's literal environment variables."""
    return {e.get("name"): e.get("value") for e in container.get("env") or [] if "name" in e}


def node_row(node: dict) -> dict[str, Any]:
    """The facts the steps print about a node."""
    lab = labels(node)
    status = node.get("status") or {}
    alloc = status.get("allocatable") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return dict(
        name=name_of(node),
        role=lab.get("role", ""),
        instance_type=lab.get("node.kubernetes.io/instance-type") or lab.get("beta.kubernetes.io/instance-type", "?"),
        zone=lab.get("topology.kubernetes.io/zone", "?"),
        nodegroup=lab.get("eks.amazonaws.com/nodegroup", ""),
        ready=ready,
        cpu=quantity(alloc.get("cpu")),
        memory=quantity(alloc.get("memory")),
        gpus=int(quantity(alloc.get(GPU_RESOURCE))),
        efa=int(quantity(alloc.get(EFA_RESOURCE))),
        taints=[t for t in (node.get("spec") or {}).get("taints") or []],
        labels=lab,
    )


def pod_ready(pod: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _container_problem(cs: dict) -> str | None:
    state = cs.get("state") or {}
    if "waiting" in state:
        waiting = state["waiting"]
        return f"container {cs.get('name')} waiting: {waiting.get('reason')}" + (
            f" ({waiting.get('message')})" if waiting.get("message") else ""
        )
    if "terminated" in state:
        ended = state["terminated"]
        return f"container {cs.get('name')} terminated: {ended.get('reason')} exit {ended.get('exitCode')}"
    if not cs.get("ready"):
        last = (cs.get("lastState") or {}).get("terminated")
        return (
            f"container {cs.get('name')} running but not ready (restarts {cs.get('restartCount', 0)}"
            + (f", last exit {last.get('reason')} {last.get('exitCode')}" if last else "")
            + ")"
        )
    return None


def pod_problem(pod: dict) -> str:
    """Why a pod is not Running/Ready, in the API's own words (scheduler message, waiting reason...)."""
    status = pod.get("status") or {}
    out = []
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            out.append(f"unschedulable: {c.get('message') or c.get('reason')}")
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        problem = _container_problem(cs)
        if problem:
            out.append(problem)
    if not out and status.get("phase") not in ("Running", "Succeeded"):
        out.append(f"phase {status.get('phase')}" + (f": {status.get('message')}" if status.get("message") else ""))
    return "; ".join(out)


def toleration_matches(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration.get("key") != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def tolerates(pod_spec: dict, key: str) -> bool:
    """Whether the pod spec tolerates the ``KEY=true:NoSchedule`` taint."""
    taint = {"key": key, "value": "true", "effect": "NoSchedule"}
    return any(toleration_matches(t, taint) for t in pod_spec.get("tolerations") or [])


def untolerated_taints(tolerations: list[dict], node: dict) -> list[dict]:
    """NoSchedule/NoExecute taints of the node that no toleration matches."""
    out = []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(toleration_matches(tol, taint) for tol in tolerations or []):
            out.append(taint)
    return out


def untolerated_taint_texts(pod_spec: dict, node: dict) -> list[str]:
    """The taints of :func:`untolerated_taints` as ``untolerated taint KEY=VALUE:EFFECT``."""
    return [
        f"untolerated taint {t.get('key')}={t.get('value', '')}:{t.get('effect')}"
        for t in untolerated_taints(pod_spec.get("tolerations") or [], node)
    ]


def _expr_matches(expr: dict, lab: dict[str, str]) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in lab and lab[key] in values
    if op == "NotIn":
        return key not in lab or lab[key] not in values
    if op == "Exists":
        return key in lab
    if op == "DoesNotExist":
        return key not in lab
    if op in ("Gt", "Lt") and key in lab:
        try:
            have, bound = int(lab[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term_misses(term: dict, lab: dict[str, str]) -> str:
    parts = []
    for expr in term.get("matchExpressions") or []:
        if _expr_matches(expr, lab):
            continue
        vals = expr.get("values") or []
        shown = ",".join(vals[:4]) + (f",... ({len(vals)} values)" if len(vals) > 4 else "")
        have = f" (node has {expr['key']}={lab[expr['key']]})" if expr.get("key") in lab else " (node lacks it)"
        parts.append(f"{expr.get('key')} {expr.get('operator')} [{shown}]{have}")
    return " and ".join(parts)


def selector_misses(pod_spec: dict, node: dict) -> list[str]:
    """Why the pod spec's nodeSelector / required node affinity rejects this node ([] = it matches)."""
    lab = labels(node)
    out = []
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if lab.get(k) != v:
            out.append(f"label {k}={v} (nodeSelector) " + (f"is {k}={lab[k]}" if k in lab else "missing"))
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(all(_expr_matches(e, lab) for e in t.get("matchExpressions") or []) for t in terms):
        out.append("required node affinity: " + " OR ".join(_term_misses(t, lab) for t in terms))
    return out


__all__ = [
    "EFA_RESOURCE",
    "GPU_RESOURCE",
    "PART_OF",
    "PART_OF_LABEL",
    "container_of",
    "env_of",
    "is_part_of_tutorial",
    "labels",
    "match_labels_selector",
    "name_of",
    "namespace_of",
    "node_row",
    "phase_of",
    "pod_problem",
    "pod_ready",
    "pod_template_spec",
    "quantity",
    "selector_misses",
    "toleration_matches",
    "tolerates",
    "untolerated_taint_texts",
    "untolerated_taints",
]
