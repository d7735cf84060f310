"""06's infrastructure rows on aws, from the Kubernetes side (:func:`infra_criteria`): allocatable GPUs and EFA on
every ``role=gpu-worker`` node, ``fi_info -p efa`` in the worker pods, the head Ready and the workers Running.
"""

from __future__ import annotations

import re

from ....clients import kubernetes as kube
from ....core.config import Settings
from ....plan.kube_objects import labels, name_of, node_row, phase_of, pod_ready
from ..kuberay.pods import cluster_pods, pod_role
from . import efa_tools

#: 06_verify's infrastructure rows on aws (the names the verification table shows).
INFRA_GPU = "GPUs allocatable on every GPU node"
INFRA_EFA = "EFA allocatable on every GPU node"
#: fi_info -p efa -t FI_EP_RDM: the efa provider offers a reliable-datagram (RDM) endpoint, which aws-ofi-nccl needs
#: (libfabric fi_efa(7), https://manpages.ubuntu.com/manpages/noble/man7/fi_efa.7.html, checked 2026-12-04)
INFRA_FI = "EFA provider with an RDM endpoint (fi_info -p efa)"
INFRA_PODS = "head Ready + workers Running"


def fi_info_efa(text: str) -> tuple[bool, str]:
    """Does ``fi_info -p efa`` output show the efa provider with a reliable-datagram (RDM) endpoint?"""
    providers = re.findall(r"^\s*provider:\s*(\S+)", text, re.M)
    types = re.findall(r"^\s*type:\s*(\S+)", text, re.M)
    domains = re.findall(r"^\s*domain:\s*(\S+)", text, re.M)
    efa = "efa" in providers
    rdm = "FI_EP_RDM" in types or any(d.endswith("-rdm") for d in domains)
    if efa and rdm:
        return True, "provider efa, FI_EP_RDM" + (f" ({', '.join(sorted(set(domains)))})" if domains else "")
    if not providers:
        return False, "no provider listed"
    return False, (f"providers {', '.join(sorted(set(providers)))}" + ("" if rdm else ", no FI_EP_RDM endpoint"))


def _too_few_nodes(nodes: list[dict], settings: Settings) -> str:
    count = settings.aws.gpu_node_count
    return f"; only {len(nodes)} role=gpu-worker node(s), GPU_NODE_COUNT = {count}" if len(nodes) < count else ""


def gpu_row(nodes: list[dict], settings: Settings) -> tuple[str, bool, str]:
    """Every GPU node advertises GPUS_PER_NODE ``nvidia.com/gpu``."""
    want, few = settings.aws.gpus_per_node, _too_few_nodes(nodes, settings)
    bad = [f"{r['name']}={r['gpus']}" for r in nodes if r["gpus"] != want]
    if bad:
        evidence = f"nvidia.com/gpu: {', '.join(bad)} (GPUS_PER_NODE {want})"
    elif nodes:
        evidence = f"{len(nodes)} GPU node(s) advertise nvidia.com/gpu={want}"
    else:
        evidence = "no node labelled role=gpu-worker"
    return INFRA_GPU, bool(nodes) and not bad and not few, evidence + few


def efa_row(nodes: list[dict], settings: Settings) -> tuple[str, bool, str]:
    """Every GPU node advertises at least one ``vpc.amazonaws.com/efa``."""
    few = _too_few_nodes(nodes, settings)
    bad = [f"{r['name']}={r['efa']}" for r in nodes if r["efa"] < 1]
    if bad:
        evidence = f"vpc.amazonaws.com/efa: {', '.join(bad)}"
    elif nodes:
        counts = ", ".join(str(r["efa"]) for r in nodes)
        evidence = f"{len(nodes)} GPU node(s) advertise vpc.amazonaws.com/efa >= 1 ({counts})"
    else:
        evidence = "no node labelled role=gpu-worker"
    return INFRA_EFA, bool(nodes) and not bad and not few, evidence + few


def _fi_info_in(client, settings: Settings, pod: str) -> tuple[bool, str]:
    try:
        return fi_info_efa(kube.exec_in_pod(settings, pod, efa_tools.fi_info_command(), client=client, timeout_s=60))
    except kube.ExecError as e:
        text = (e.stderr or e.stdout or "").strip()
        return False, f"exit {e.returncode}: " + (text.splitlines()[-1] if text else str(e))
    except kube.K8sError as e:
        return False, str(e)


def fi_info_row(client, settings: Settings, running: list[dict]) -> tuple[str, bool, str]:
    """``fi_info -p efa`` in every Running worker pod finds the efa provider with an RDM endpoint."""
    if not running:
        return INFRA_FI, False, "no Running worker pod to run fi_info in. Fix: run notebook 04"
    seen, fails = [], []
    for pod in running:
        ok, evidence = _fi_info_in(client, settings, name_of(pod))
        (seen if ok else fails).append((name_of(pod), evidence))
    if not fails:
        return INFRA_FI, True, f"{len(seen)}/{len(running)} worker pod(s): {seen[0][1]}"
    return (
        INFRA_FI,
        False,
        "; ".join(f"{n}: {e}" for n, e in fails[:3])
        + (
            ". Fix: the pods need a vpc.amazonaws.com/efa request on EFA-enabled nodes (notebook 03, efaEnabled in the "
            "GPU node group)"
        ),
    )


def pods_row(pods: list[dict], settings: Settings) -> tuple[str, bool, str]:
    """The head Ready and GPU_NODE_COUNT workers Running."""
    count = settings.aws.gpu_node_count
    workers = sorted((p for p in pods if pod_role(p) == "worker"), key=name_of)
    running = [p for p in workers if phase_of(p) == "Running"]
    heads = [p for p in pods if pod_role(p) == "head"]
    ready = bool(heads) and all(pod_ready(h) for h in heads)
    evidence = (
        f"head {'Ready' if ready else 'not Ready' if heads else 'missing'}, workers Running {len(running)}/{count}"
    )
    if workers and len(running) < len(workers):
        waiting = ", ".join(
            f"{name_of(p)} {(p.get('status') or {}).get('phase', '?')}" for p in workers if p not in running
        )
        evidence += f" ({waiting[:200]})"
    return INFRA_PODS, ready and len(running) >= count, evidence


def infra_criteria(settings: Settings, *, client=None) -> list[tuple[str, bool, str]]:
    """06_verify's aws infrastructure rows, from the Kubernetes side: allocatable GPUs and EFA on every
    ``role=gpu-worker`` node, ``fi_info -p efa`` in the worker pods, the head Ready and the workers Running.
    Returns ``[(name, ok, evidence)]``; an unreachable API fails every row with the reason."""
    try:
        with kube.using_client(settings, client) as api:
            nodes = [node_row(n) for n in kube.list_objects(api, "v1", "Node") if labels(n).get("role") == "gpu-worker"]
            pods = cluster_pods(api, settings)
            running = sorted((p for p in pods if pod_role(p) == "worker" and phase_of(p) == "Running"), key=name_of)
            fi_info = fi_info_row(api, settings, running)
    except kube.K8sError as e:
        return [(name, False, f"Kubernetes API: {e}") for name in (INFRA_GPU, INFRA_EFA, INFRA_FI, INFRA_PODS)]
    return [gpu_row(nodes, settings), efa_row(nodes, settings), fi_info, pods_row(pods, settings)]


__all__ = [
    "INFRA_EFA",
    "INFRA_FI",
    "INFRA_GPU",
    "INFRA_PODS",
    "efa_row",
    "fi_info_efa",
    "fi_info_row",
    "gpu_row",
    "infra_criteria",
    "pods_row",
]
