"""A local stand-in for the Kubernetes API of the tutorial's EKS cluster.

A threaded HTTP server on 127.0.0.1 that speaks enough of the Kubernetes REST API for the tutorial's
client code (``raytrain_helpers.clients.kubernetes`` and ``targets.aws.plugins.install``/``kuberay``) to run unchanged
against it:

* ``GET`` nodes, pods, namespaces, DaemonSets, Deployments, RBAC objects, CRDs and the ray.io custom
  resources (collections with ``labelSelector``/``fieldSelector``, single objects, 404 Status bodies);
* server-side apply (``PATCH`` ``application/apply-patch+yaml`` with ``fieldManager``), ``DELETE`` with
  cascading to owned pods; namespaced objects need their namespace, custom resources their CRD;
* the ``exec`` and ``portforward`` pod subresources over a real websocket (``v4.channel.k8s.io``):
  exec answers from a small command table (``fi_info -p efa`` by the pod's EFA request, ``cat`` of the
  files given with ``files=`` for every pod or ``pod_files=`` per node/pod, the worker-log listing loop of
  ``nccl.collect_pod_logs`` over those files, ``hostname``, ``echo``, ``exit N``, and ``python3 -c PROGRAM``
  run for real in this process's environment); port-forward relays to a
  real TCP upstream (by default a fake Ray dashboard that answers ``/api/version``;
  ``dashboard_upstream="127.0.0.1:8266"`` relays to a real local Ray cluster instead);
* bearer-token auth (401 without it);
* core/v1 Events, as the scheduler and the kubelet record them for a pod (``involvedObject``, ``reason``,
  ``message``, ``type``, ``source``, ``firstTimestamp``/``lastTimestamp``, ``count``; ``eventTime`` unset as for
  core/v1 events): Scheduled (or FailedScheduling, its ``count`` raised on each retry), then Pulling,
  Pulled, Created and Started per container; ``pull_s`` makes the pull take that long (a multi-GB image).

Controllers stand in for the kubelet, the scheduler, the DaemonSet/Deployment controllers, the device
plugins and the KubeRay operator, from the nodes' labels, taints and allocatable: a DaemonSet runs only
on nodes its selector, affinity and tolerations admit (so DESIRED 0 arises by itself); a pod is bound
only to a node it fits, else it stays Pending with the scheduler's kind of message; a Ready NVIDIA/EFA
plugin pod makes its node advertise ``nvidia.com/gpu``/``vpc.amazonaws.com/efa``; a Ready
``kuberay-operator`` Deployment plus the RayCluster CRD turn a RayCluster into head and worker pods labelled as
KubeRay v1.7.0 labels them, and a RayJob into its RayCluster ``<rayjob name>-<5 random characters>`` (kuberay.py).

Versions it models: the Kubernetes API of Kubernetes 1.36 (``/version``; :data:`KUBERNETES_VERSION`, the newest
``aws.k8s_version`` the preflight accepts: raytrain_helpers.core.constants.K8S_MODELLED_VERSION) and the KubeRay
operator v1.7.0 (kuberay.py). Every behaviour and its source: docs/testing.md, "What the fakes model".
State changes take ``delay_s`` seconds, so callers really wait.

Use::

    with standin("healthy", gpu_node_count=2, set_env=True) as s:   # KUBECONFIG points at it
        plugins.devices(settings); kuberay.raycluster(settings)      # raytrain_helpers.targets.aws

or from a shell (for headless notebook runs)::

    python -m tests.fakes.k8s_standin.server --scenario healthy --kubeconfig /tmp/standin.kubeconfig
    KUBECONFIG=/tmp/standin.kubeconfig papermill ... -p target aws

Scenarios (:data:`SCENARIOS`): ``healthy`` (nothing installed yet; every step can succeed),
``plugin-desired-0`` (the GPU nodes lack ``role=gpu-worker``: the plugin DaemonSets select no node),
``pods-pending`` (plugins and operator installed, but the GPU nodes carry an extra ``dedicated`` taint),
``head-never-ready`` (plugins and operator installed; the Ray head runs but never becomes Ready).

Options beside the scenarios: ``eksctl_efa_plugin=True`` puts eksctl's own EFA device plugin DaemonSet in
kube-system first, as ``eksctl create nodegroup`` of an ``efaEnabled`` node group leaves it
(:func:`eksctl_efa_daemonset`; put it again with ``mutate`` for a later node group); ``gpu_taints=False`` gives the
GPU nodes no taints, as the tutorial's GPU node group is rendered; ``image_pull_fail=TEXT`` keeps the pods whose
image contains TEXT Pending in ``ImagePullBackOff``, as the kubelet reports a tag the registry lacks.

EKS Pod Identity (``pod_identity=True``, the default): the one admission webhook it plays is EKS's, at a pod's
creation: a pod whose ServiceAccount has an association on the AWS endpoint of this process (``AWS_ENDPOINT_URL``, the
moto server: EKS ``ListPodIdentityAssociations``) gets ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` and
``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``, and its ``python3 -c`` runs with a session of the associated role (STS
``AssumeRole`` standing in for the node's Pod Identity agent, whose link-local address is unreachable here). A pod
created before the association, or with ``pod_identity=callable`` answering None, gets neither, and runs with
``node_role``'s session when set (the SDK's fallback to the instance metadata), else this process's credentials.

What it does not do: TLS, watches, other admission webhooks, the real scheduler's scoring, strategic-merge or
JSON patches, CEL validation rules.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import fnmatch
import hashlib
import http.server
import json
import os
import random
import re
import select
import signal
import socket
import string
import struct
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from . import kuberay

TOKEN = "standin-token"
#: What ``/version`` answers: the Kubernetes minor version the stand-in models (an EKS build's form of gitVersion).
KUBERNETES_VERSION = "v1.36.0-eks-standin"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

#: (group/version, plural) -> (kind, namespaced) for the built-in resources.
BUILTIN: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "namespaces"): ("Namespace", False),
    ("v1", "nodes"): ("Node", False),
    ("v1", "pods"): ("Pod", True),
    ("v1", "services"): ("Service", True),
    ("v1", "serviceaccounts"): ("ServiceAccount", True),
    ("v1", "configmaps"): ("ConfigMap", True),
    ("v1", "secrets"): ("Secret", True),
    ("v1", "resourcequotas"): ("ResourceQuota", True),
    ("v1", "limitranges"): ("LimitRange", True),
    ("networking.k8s.io/v1", "networkpolicies"): ("NetworkPolicy", True),
    ("v1", "events"): ("Event", True),
    ("apps/v1", "daemonsets"): ("DaemonSet", True),
    ("apps/v1", "deployments"): ("Deployment", True),
    ("rbac.authorization.k8s.io/v1", "clusterroles"): ("ClusterRole", False),
    ("rbac.authorization.k8s.io/v1", "clusterrolebindings"): ("ClusterRoleBinding", False),
    ("rbac.authorization.k8s.io/v1", "roles"): ("Role", True),
    ("rbac.authorization.k8s.io/v1", "rolebindings"): ("RoleBinding", True),
    ("apiextensions.k8s.io/v1", "customresourcedefinitions"): ("CustomResourceDefinition", False),
    ("admissionregistration.k8s.io/v1", "validatingadmissionpolicies"): ("ValidatingAdmissionPolicy", False),
    ("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings"): (
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
}

#: Hardware of the instance types the stand-in can model: vCPU, GiB, GPUs, EFA interfaces.
HARDWARE: dict[str, tuple[int, int, int, int]] = {
    "m7i.xlarge": (4, 16, 0, 0),
    "m7i.2xlarge": (8, 32, 0, 0),
    "m5.xlarge": (4, 16, 0, 0),
    "g5.12xlarge": (48, 192, 4, 1),
    "g5.48xlarge": (192, 768, 8, 1),
    "g6.8xlarge": (32, 128, 1, 1),
    "g6.12xlarge": (48, 192, 4, 1),
    "g6.24xlarge": (96, 384, 4, 1),
    "g6.48xlarge": (192, 768, 8, 1),
    "g6e.12xlarge": (48, 384, 4, 1),
    "g6e.48xlarge": (192, 1536, 8, 4),
    "p4d.24xlarge": (96, 1152, 8, 4),
    "p4de.24xlarge": (96, 1152, 8, 4),
    "p5.48xlarge": (192, 2048, 8, 32),
    "p5e.48xlarge": (192, 2048, 8, 32),
    "p5en.48xlarge": (192, 2048, 8, 16),
    "p6-b200.48xlarge": (192, 2048, 8, 8),
}

#: The instance-type allowlist of the EFA device plugin DaemonSet eksctl creates itself with ``efaEnabled: true``
#: (eksctl-io/eksctl at 99984adb, pkg/addons/assets/efa-device-plugin.yaml, read 2026-12-04): no p6 and no g7 types.
EKSCTL_EFA_ALLOWLIST = """
m5dn.24xlarge m5dn.metal m5n.24xlarge m5n.metal m5zn.12xlarge m5zn.metal m6a.48xlarge m6a.metal m6i.32xlarge m6i.metal
m6id.32xlarge m6id.metal m6idn.32xlarge m6idn.metal m6in.32xlarge m6in.metal m7a.48xlarge m7a.metal-48xl m7g.16xlarge
m7g.metal m7gd.16xlarge m7i.48xlarge m7i.metal-48xl c5n.9xlarge c5n.18xlarge c5n.metal c6a.48xlarge c6a.metal
c6gn.16xlarge c6i.32xlarge c6i.metal c6id.32xlarge c6id.metal c6in.32xlarge c6in.metal c7a.48xlarge c7a.metal-48xl
c7g.16xlarge c7g.metal c7gd.16xlarge c7gn.16xlarge c7i.48xlarge c7i.metal-48xl r5dn.24xlarge r5dn.metal r5n.24xlarge
r5n.metal r6a.48xlarge r6a.metal r6i.32xlarge r6i.metal r6idn.32xlarge r6idn.metal r6in.32xlarge r6in.metal
r6id.32xlarge r6id.metal r7a.48xlarge r7a.metal-48xl r7g.16xlarge r7g.metal r7gd.16xlarge r7i.48xlarge r7i.metal-48xl
r7iz.32xlarge r7iz.metal-32xl x2idn.32xlarge x2idn.metal x2iedn.32xlarge x2iedn.metal x2iezn.12xlarge x2iezn.metal
i3en.12xlarge i3en.24xlarge i3en.metal i4g.16xlarge i4i.32xlarge i4i.metal im4gn.16xlarge dl1.24xlarge dl2q.24xlarge
g4dn.8xlarge g4dn.12xlarge g4dn.16xlarge g4dn.metal g5.8xlarge g5.12xlarge g5.16xlarge g5.24xlarge g5.48xlarge
g6.8xlarge g6.12xlarge g6.16xlarge g6.24xlarge g6.48xlarge g6e.8xlarge g6e.12xlarge g6e.16xlarge g6e.24xlarge
g6e.48xlarge gr6.8xlarge inf1.24xlarge p3dn.24xlarge p4d.24xlarge p4de.24xlarge p5.48xlarge p5e.48xlarge p5en.48xlarge
trn1.32xlarge trn1n.32xlarge trn2.48xlarge vt1.24xlarge hpc6a.48xlarge hpc6id.32xlarge hpc7a.12xlarge hpc7a.24xlarge
hpc7a.48xlarge hpc7a.96xlarge hpc7g.4xlarge hpc7g.8xlarge hpc7g.16xlarge
""".split()


def eksctl_efa_daemonset(region: str = "us-west-2") -> dict:
    """The DaemonSet eksctl creates (or replaces) on ``create cluster`` / ``create nodegroup`` when a node group has
    ``efaEnabled: true``: its asset as applied (no metadata labels; the image of the region's EKS account)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "aws-efa-k8s-device-plugin", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"name": "aws-efa-k8s-device-plugin"}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"name": "aws-efa-k8s-device-plugin"}},
                "spec": {
                    "tolerations": [
                        {"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
                    ],
                    "priorityClassName": "system-node-critical",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "node.kubernetes.io/instance-type",
                                                "operator": "In",
                                                "values": list(EKSCTL_EFA_ALLOWLIST),
                                            },
                                            {
                                                "key": "eks.amazonaws.com/compute-type",
                                                "operator": "NotIn",
                                                "values": ["auto"],
                                            },
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "hostNetwork": True,
                    "containers": [
                        {
                            "image": f"602401143452.dkr.ecr.{region}.amazonaws.com/eks/"
                            "aws-efa-k8s-device-plugin:v0.5.4",
                            "name": "aws-efa-k8s-device-plugin",
                            "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}},
                        }
                    ],
                },
            },
        },
    }


SCENARIOS: dict[str, dict[str, Any]] = {
    "healthy": {},
    "plugin-desired-0": {"gpu_role_label": False},
    "pods-pending": {
        "plugins_installed": True,
        "operator_installed": True,
        "extra_gpu_taint": {"key": "dedicated", "value": "ml-training", "effect": "NoSchedule"},
    },
    "head-never-ready": {"plugins_installed": True, "operator_installed": True, "head_never_ready": True},
}

DEFAULTS: dict[str, Any] = dict(
    gpu_node_count=2,
    gpu_node_type="g6.12xlarge",
    system_node_type="m7i.xlarge",
    zone="us-west-2a",
    region="us-west-2",
    gpu_nodegroup="gpu-efa",
    gpu_role_label=True,
    gpu_present_label=False,
    node_instance_type_label=None,
    efa_attached=True,
    extra_gpu_taint=None,
    plugins_installed=False,
    chart_style_plugins=False,
    operator_installed=False,
    crd_dir=None,
    head_never_ready=False,
    plugin_crash=None,
    image_pull_fail=None,
    eksctl_efa_plugin=False,
    gpu_taints=True,
    delay_s=0.2,
    preload=(),
    files=None,
    pod_files=None,
    exec_handler=None,
    pod_identity=True,  # EKS Pod Identity's webhook and agent (see PodIdentity); False: none; callable (ns, sa) -> role
    node_role=None,  # a pod without Pod Identity's variables runs as this role (the node's, through the metadata)
    dashboard_upstream=None,
    # the token the "operator" puts in a RayCluster's auth Secret: None = a random one, as KubeRay does; a callable
    # returning the token the Ray processes behind dashboard_upstream were started with (their pods' token)
    ray_token=None,
    ray_version="2.58.0",
    kuberay_version="1.7.0",  # the preinstalled operator's image tag
    helm=True,  # with set_env: the fake helm (tests/fakes/helm.py), pointed at this cluster, first on PATH
    # the release labels of the preinstalled plugin and operator releases: the tutorial's own (as 03/04 install them,
    # `helm upgrade --install --labels`); {} = releases of the same names someone else installed
    release_labels={"raytrain-tutorial": "raytrain-tutorial"},
    pull_s=0.0,  # how long the kubelet takes to pull a new pod's images (after delay_s)
    nvidia_driver="580.95.05",  # the GPU nodes' NVIDIA driver, as nvidia-smi prints it (a dict: per node)
    context="standin",
)


#: What EKS Pod Identity's webhook sets in each container (EKS User Guide, "Understand how EKS Pod Identity works";
#: AWS SDKs and Tools Reference Guide, "Container credential provider").
POD_IDENTITY_ENV = {
    "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": (
        "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token"
    ),
}


def association_role(namespace: str, service_account: str) -> str | None:
    """The role of the EKS Pod Identity association of ``namespace/service_account`` in any cluster of the region,
    read from the AWS endpoint this process uses (``AWS_ENDPOINT_URL``: the moto server); None without one."""
    if not os.environ.get("AWS_ENDPOINT_URL"):
        return None
    import boto3

    eks = boto3.client("eks", region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-west-2")
    try:
        for cluster in eks.list_clusters()["clusters"]:
            found = eks.list_pod_identity_associations(
                clusterName=cluster, namespace=namespace, serviceAccount=service_account
            )["associations"]
            for a in found:
                got = eks.describe_pod_identity_association(clusterName=cluster, associationId=a["associationId"])
                return got["association"]["roleArn"]
    except Exception:  # noqa: BLE001 - no EKS (or no Pod Identity API) there: no association
        return None
    return None


def assumed_role_env(role_arn: str, session: str) -> dict[str, str]:
    """A session of ``role_arn`` from STS AssumeRole on this process's AWS endpoint, as the SDK's environment."""
    import boto3

    c = boto3.client("sts", region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-west-2")
    cr = c.assume_role(RoleArn=role_arn, RoleSessionName=session[:64])["Credentials"]
    return {
        "AWS_ACCESS_KEY_ID": cr["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": cr["SecretAccessKey"],
        "AWS_SESSION_TOKEN": cr["SessionToken"],
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _rand(n: int = 5) -> str:
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(n))


def _quantity(v: Any) -> float:
    """Kubernetes quantity -> float (cores, bytes, counts): the stand-in's own parser."""
    if v is None:
        return 0.0
    s = str(v).strip()
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", s)
    if not m:
        raise ValueError(f"bad quantity {v!r}")
    num, suf = float(m.group(1)), m.group(2)
    mult = {
        "": 1,
        "m": 1e-3,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
        "Ki": 1024,
        "Mi": 1024**2,
        "Gi": 1024**3,
        "Ti": 1024**4,
    }
    if suf not in mult:
        raise ValueError(f"bad quantity suffix {v!r}")
    return num * mult[suf]


def _status(code: int, message: str, reason: str = "") -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason
        or {
            400: "BadRequest",
            401: "Unauthorized",
            404: "NotFound",
            409: "Conflict",
            415: "UnsupportedMediaType",
            422: "Invalid",
        }.get(code, ""),
        "code": code,
    }


class ApiError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


# ============================================================================================
# Selectors, taints, scheduling (the stand-in's own implementation)
# ============================================================================================


def _split_selector(sel: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in sel:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def label_selector_matches(sel: str | None, labels: dict[str, str]) -> bool:
    if not sel:
        return True
    for req in _split_selector(sel):
        m = re.fullmatch(r"([^\s!=]+)\s+(in|notin)\s+\((.*)\)", req)
        if m:
            vals = {x.strip() for x in m.group(3).split(",")}
            has = m.group(1) in labels and labels[m.group(1)] in vals
            if (m.group(2) == "in") != has:
                return False
            continue
        if "!=" in req:
            k, v = req.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in req:
            k, v = req.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif req.startswith("!"):
            if req[1:] in labels:
                return False
        elif req not in labels:
            return False
    return True


def field_selector_matches(sel: str | None, obj: dict) -> bool:
    if not sel:
        return True
    for req in sel.split(","):
        neg = "!=" in req
        k, v = req.split("!=" if neg else "=", 1)
        cur: Any = obj
        for part in k.strip().split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if ((cur or "") == v.strip()) == neg:
            return False
    return True


def _node_labels(node: dict) -> dict[str, str]:
    return node["metadata"].get("labels") or {}


def _affinity_ok(pod_spec: dict, labels: dict[str, str]) -> bool:
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    terms = (
        ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    if not terms:
        return True

    def expr_ok(e):
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In":
            return labels.get(k) in vals
        if op == "NotIn":
            return labels.get(k) not in vals
        if op == "Exists":
            return k in labels
        if op == "DoesNotExist":
            return k not in labels
        return False

    return any(all(expr_ok(e) for e in t.get("matchExpressions") or []) for t in terms)


def _untolerated(pod_spec: dict, node: dict) -> list[dict]:
    bad = []
    for t in node.get("spec", {}).get("taints") or []:
        if t["effect"] not in ("NoSchedule", "NoExecute"):
            continue
        ok = False
        for tol in pod_spec.get("tolerations") or []:
            if tol.get("effect") and tol["effect"] != t["effect"]:
                continue
            if not tol.get("key"):
                ok = tol.get("operator") == "Exists"
            elif tol["key"] == t["key"]:
                ok = tol.get("operator") == "Exists" or tol.get("value", "") == t.get("value", "")
            if ok:
                break
        if not ok:
            bad.append(t)
    return bad


def _pod_requests(pod: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in pod["spec"].get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            out[k] = out.get(k, 0.0) + _quantity(v)
    return out


# ============================================================================================
# The cluster state and its controllers
# ============================================================================================


class Cluster:
    def __init__(self, opts: dict[str, Any]):
        self.o = opts
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str, str], dict] = {}
        self.rv = 1000
        self.requests: list[tuple[str, str]] = []
        self.applied: list[tuple[str, str, str]] = []  # (kind, namespace, name) in apply order
        self.exec_log: list[tuple[str, list[str]]] = []
        self.portforwards: list[tuple[str, int]] = []
        self.hw: dict[str, dict[str, int]] = {}
        self.dashboard_addr: tuple[str, int] | None = None
        self._build()

    # ---- storage ---------------------------------------------------------------------------
    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def kind_info(self, gv: str, plural: str) -> tuple[str, bool] | None:
        if (gv, plural) in BUILTIN:
            return BUILTIN[(gv, plural)]
        group, _, version = gv.rpartition("/")
        for crd in self.list("apiextensions.k8s.io/v1", "customresourcedefinitions"):
            s = crd.get("spec") or {}
            if (
                s.get("group") == group
                and (s.get("names") or {}).get("plural") == plural
                and any(v.get("name") == version and v.get("served", True) for v in s.get("versions") or [])
            ):
                return s["names"]["kind"], s.get("scope") == "Namespaced"
        return None

    def plural_of(self, gv: str, kind: str) -> str:
        for (g, p), (k, _) in BUILTIN.items():
            if g == gv and k == kind:
                return p
        group, _, version = gv.rpartition("/")
        for crd in self.list("apiextensions.k8s.io/v1", "customresourcedefinitions"):
            s = crd.get("spec") or {}
            if s.get("group") == group and (s.get("names") or {}).get("kind") == kind:
                return s["names"]["plural"]
        raise KeyError(f"{gv} {kind}")

    def put(self, obj: dict, *, plural: str | None = None) -> dict:
        gv, kind = obj["apiVersion"], obj["kind"]
        plural = plural or self.plural_of(gv, kind)
        md = obj.setdefault("metadata", {})
        md.setdefault("uid", str(uuid.uuid4()))
        md.setdefault("creationTimestamp", _now())
        md["resourceVersion"] = self._next_rv()
        md.setdefault("generation", 1)
        key = (gv, plural, md.get("namespace", ""), md["name"])
        obj.setdefault("_t", time.monotonic())
        self.objects[key] = obj
        return obj

    def get(self, gv: str, plural: str, ns: str, name: str) -> dict | None:
        return self.objects.get((gv, plural, ns or "", name))

    def list(self, gv: str, plural: str, ns: str | None = None) -> list[dict]:
        return [
            o
            for (g, p, n, _), o in sorted(self.objects.items(), key=lambda kv: kv[0])
            if g == gv and p == plural and (ns is None or n == ns)
        ]

    def remove(self, gv: str, plural: str, ns: str, name: str) -> dict | None:
        obj = self.objects.pop((gv, plural, ns or "", name), None)
        if obj is None:
            return None
        uid = obj["metadata"]["uid"]
        # garbage collection of dependents (owner references), and of a namespace's content
        for key, o in list(self.objects.items()):
            owners = o["metadata"].get("ownerReferences") or []
            if any(r.get("uid") == uid for r in owners):
                self.remove(*key)
            elif plural == "namespaces" and key[2] == name:
                self.objects.pop(key, None)
        if plural == "customresourcedefinitions":
            s = obj.get("spec") or {}
            gvs = {f"{s.get('group')}/{v.get('name')}" for v in s.get("versions") or []}
            for key in [k for k in self.objects if k[0] in gvs and k[1] == s.get("names", {}).get("plural")]:
                self.objects.pop(key, None)
        return obj

    # ---- initial state -----------------------------------------------------------------------
    def _node(self, name: str, itype: str, labels: dict[str, str], taints: list[dict]) -> dict:
        vcpus, mem_gib, gpus, efa = HARDWARE[itype]
        max_pods = 58 if vcpus <= 8 else (110 if vcpus < 30 else 250)
        cpu_m = int(vcpus * 1000 - 80 - 2.5 * max(vcpus - 4, 0))
        mem_ki = int(mem_gib * 1024 * 1024 * 0.955 - (11 * max_pods + 355) * 1024)
        self.hw[name] = {"gpus": gpus, "efa": efa if self.o["efa_attached"] else 0}
        # the node's root volume (manifests/eksctl-*.yaml.j2 volumeSize: 300 GiB on GPU nodes, 100 on system nodes),
        # as the kubelet reports it: allocatable = capacity - kubeReserved 1Gi - evictionHard nodefs.available 10 %
        # (awslabs/amazon-eks-ami, nodeadm/internal/kubelet/config.go)
        disk_ki = (300 if gpus else 100) * 1024 * 1024
        capacity = {"cpu": str(vcpus), "memory": f"{mem_gib * 1024 * 1024}Ki", "pods": str(max_pods),
                    "ephemeral-storage": f"{disk_ki}Ki"}  # fmt: skip
        alloc = {"cpu": f"{cpu_m}m", "memory": f"{mem_ki}Ki", "pods": str(max_pods),
                 "ephemeral-storage": f"{int(disk_ki * 0.9) - 1024 * 1024}Ki"}  # fmt: skip
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints} if taints else {},
            "status": {
                "capacity": capacity,
                "allocatable": alloc,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "nodeInfo": {"kubeletVersion": "v1.33.5-eks", "osImage": "Amazon Linux 2023"},
            },
        }

    def _build(self) -> None:
        o = self.o
        for ns in ("default", "kube-system", "kube-public"):
            self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        sys_name = "ip-10-0-1-10.us-west-2.compute.internal"
        base = {
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/region": o["region"],
            "topology.kubernetes.io/zone": o["zone"],
        }
        self.put(
            self._node(
                sys_name,
                o["system_node_type"],
                {
                    **base,
                    "role": "system",
                    "node.kubernetes.io/instance-type": o["system_node_type"],
                    "eks.amazonaws.com/nodegroup": "system",
                    "kubernetes.io/hostname": sys_name,
                },
                [],
            )
        )
        for i in range(o["gpu_node_count"]):
            name = f"ip-10-0-2-{20 + i}.us-west-2.compute.internal"
            lab = {
                **base,
                "node.kubernetes.io/instance-type": o["node_instance_type_label"] or o["gpu_node_type"],
                "eks.amazonaws.com/nodegroup": o["gpu_nodegroup"],
                "kubernetes.io/hostname": name,
            }
            if o["gpu_role_label"]:
                lab["role"] = "gpu-worker"
            if o["gpu_present_label"]:
                lab["nvidia.com/gpu.present"] = "true"
            taints = (
                [
                    {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
                    {"key": "aws.amazon.com/efa", "value": "true", "effect": "NoSchedule"},
                ]
                if o["gpu_taints"]
                else []  # the tutorial's GPU node group as rendered (manifests/eksctl-gpu-nodegroup.yaml.j2)
            )
            if o["extra_gpu_taint"]:
                taints.append(dict(o["extra_gpu_taint"]))
            node = self._node(name, o["gpu_node_type"], lab, taints)
            self.put(node)
        # what EKS runs before anything of ours
        for n in self.list("v1", "nodes"):
            nn = n["metadata"]["name"]
            for app, cpu in (("aws-node", "25m"), ("kube-proxy", "100m")):
                self._static_pod("kube-system", f"{app}-{_rand()}", nn, {"k8s-app": app}, {"cpu": cpu})
        for _ in range(2):
            self._static_pod(
                "kube-system",
                f"coredns-{_rand(9)}-{_rand()}",
                sys_name,
                {"k8s-app": "kube-dns"},
                {"cpu": "100m", "memory": "70Mi"},
            )
        self._static_pod(
            "kube-system",
            f"metrics-server-{_rand(9)}-{_rand()}",
            sys_name,
            {"k8s-app": "metrics-server"},
            {"cpu": "100m", "memory": "200Mi"},
        )
        if o["eksctl_efa_plugin"]:  # eksctl ran with efaEnabled: true (02) before anything of the tutorial's
            ds = self.put(eksctl_efa_daemonset(o["region"]))
            ds["_t"] = time.monotonic() - 3600
        if o["plugins_installed"]:
            for obj in self._preinstalled_plugins():
                self.put(obj)
                obj["_t"] = time.monotonic() - 3600
        if o["operator_installed"]:
            from tests.fakes import helm as fake_helm

            self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kuberay-system"}})
            for obj in fake_helm.release_objects(
                "kuberay-operator",
                "kuberay-operator",
                "kuberay-system",
                o["kuberay_version"],
                {"nodeSelector": {"role": "system"}},
                o["release_labels"],
            ):
                self.put(obj)
                obj["_t"] = time.monotonic() - 3600
            self._install_crds()
        for obj in o["preload"] or ():
            obj = copy.deepcopy(obj)
            ns = obj.get("metadata", {}).get("namespace")
            if ns and not self.get("v1", "namespaces", "", ns):
                self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            self.put(obj)
        self.reconcile()

    def _install_crds(self) -> None:
        if self.o["crd_dir"]:
            for f in sorted(Path(self.o["crd_dir"]).glob("ray.io_*.yaml")):
                for crd in yaml.load_all(f.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                    if crd:
                        self.put(crd)
            return
        for kind, plural in (("RayCluster", "rayclusters"), ("RayJob", "rayjobs"), ("RayService", "rayservices")):
            self.put(
                {
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": f"{plural}.ray.io"},
                    "spec": {
                        "group": "ray.io",
                        "scope": "Namespaced",
                        "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                        "versions": [{"name": "v1", "served": True, "storage": True}],
                    },
                }
            )

    def _preinstalled_plugins(self) -> list[dict]:
        """The tutorial's two plugin releases as the fake helm leaves them: with the tutorial's values, or
        (``chart_style_plugins``) the NVIDIA chart with its default values (affinity on NFD/GFD labels)."""
        from tests.fakes import helm as fake_helm

        tol = [
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
        ]
        gpu = {"role": "gpu-worker"}
        nv_values = {} if self.o["chart_style_plugins"] else {"nodeSelector": gpu, "affinity": None, "tolerations": tol}
        releases = [
            ("nvidia-device-plugin", "nvidia-device-plugin", "0.20.0", nv_values),
            (
                "raytrain-aws-efa-k8s-device-plugin",
                "aws-efa-k8s-device-plugin",
                "v0.5.30",
                {"nodeSelector": gpu, "tolerations": tol[1:]},
            ),
        ]
        labels = self.o["release_labels"]
        return [obj for r in releases for obj in fake_helm.release_objects(*r[:2], "kube-system", *r[2:], labels)]

    def _static_pod(self, ns: str, name: str, node: str, labels: dict, requests: dict) -> None:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "eks/system", "resources": {"requests": requests}}],
            },
        }
        self._set_running(pod, ready=True)
        self.put(pod)

    # ---- pods ------------------------------------------------------------------------------
    def _set_running(
        self,
        pod: dict,
        *,
        ready: bool,
        waiting: tuple[str, str] | None = None,
        restarts: int = 0,
        last_exit: dict | None = None,
    ) -> None:
        cs = []
        for c in pod["spec"].get("containers") or []:
            st: dict[str, Any] = {
                "name": c["name"],
                "image": c.get("image", ""),
                "ready": ready,
                "restartCount": restarts,
                "started": waiting is None,
            }
            st["state"] = (
                {"waiting": {"reason": waiting[0], "message": waiting[1]}}
                if waiting
                else {"running": {"startedAt": _now()}}
            )
            if last_exit:
                st["lastState"] = {"terminated": last_exit}
            cs.append(st)
        flag = "True" if ready else "False"
        pod["status"] = {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "podIP": f"10.0.{random.randint(2, 250)}.{random.randint(2, 250)}",
            "startTime": _now(),
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "ContainersReady", "status": flag},
                {"type": "Ready", "status": flag},
            ],
            "containerStatuses": cs,
        }

    def _event(self, pod: dict, reason: str, message: str, *, source: str = "kubelet", warning: bool = False) -> None:
        """Record a core/v1 Event about ``pod`` (a repeated reason+message raises ``count``, as the recorder does)."""
        md = pod["metadata"]
        for ev in self.list("v1", "events", md["namespace"]):
            io = ev["involvedObject"]
            if io.get("uid") == md.get("uid") and ev["reason"] == reason and ev["message"] == message:
                ev["count"] += 1
                ev["lastTimestamp"] = _now()
                ev["metadata"]["resourceVersion"] = self._next_rv()
                return
        node = pod["spec"].get("nodeName", "")
        self.put(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{md['name']}.{uuid.uuid4().hex[:16]}", "namespace": md["namespace"]},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": md["name"],
                    "namespace": md["namespace"],
                    "uid": md.get("uid", ""),
                },
                "reason": reason,
                "message": message,
                "type": "Warning" if warning else "Normal",
                "source": {"component": source, **({"host": node} if source == "kubelet" else {})},
                "firstTimestamp": _now(),
                "lastTimestamp": _now(),
                "eventTime": None,
                "count": 1,
                "reportingComponent": source,
                "reportingInstance": node if source == "kubelet" else "",
            }
        )

    def _pull_and_start_events(self, pod: dict) -> None:
        """The kubelet's events for each container: Pulling, Pulled, Created, Started."""
        for c in pod["spec"].get("containers") or []:
            image, waited = c.get("image", ""), min(time.monotonic() - pod["_pull_t"], self.o["pull_s"] + 0.5)
            size = 9_876_543_210 if "deep-learning-containers" in image else 45_678_901
            self._event(
                pod,
                "Pulled",
                f'Successfully pulled image "{image}" in {waited:.3f}s ({waited:.3f}s including waiting). '
                f"Image size: {size} bytes.",
            )
            self._event(pod, "Created", f"Created container: {c['name']}")
            self._event(pod, "Started", f"Started container {c['name']}")

    def _new_pod(self, ns: str, name: str, template: dict, owner: dict, extra_labels: dict | None = None) -> dict:
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels.update(extra_labels or {})
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": owner["metadata"]["name"],
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": copy.deepcopy(template.get("spec") or {}),
            "status": {"phase": "Pending", "conditions": []},
        }
        self.admit_pod(pod)
        return self.put(pod)

    def _free(self, node: dict) -> dict[str, float]:
        free = {k: _quantity(v) for k, v in node["status"]["allocatable"].items()}
        nn = node["metadata"]["name"]
        for p in self.list("v1", "pods"):
            if p["spec"].get("nodeName") == nn and p.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                for k, v in _pod_requests(p).items():
                    free[k] = free.get(k, 0.0) - v
        return free

    def _schedule(self, pod: dict) -> None:
        """Bind a pending pod to the first node it fits, or record why none fits (scheduler style)."""
        nodes = self.list("v1", "nodes")
        reasons: dict[str, int] = {}
        req = _pod_requests(pod)
        for n in nodes:
            why = None
            bad = _untolerated(pod["spec"], n)
            if not _affinity_ok(pod["spec"], _node_labels(n)):
                why = "node(s) didn't match Pod's node affinity/selector"
            elif bad:
                why = "node(s) had untolerated taint {" + f"{bad[0]['key']}: {bad[0].get('value', '')}" + "}"
            else:
                free = self._free(n)
                short = [k for k, v in sorted(req.items()) if free.get(k, 0.0) + 1e-9 < v]
                if short:
                    why = f"Insufficient {short[0]}"
            if why is None:
                pod["spec"]["nodeName"] = n["metadata"]["name"]
                pod["_bound"] = time.monotonic()
                pod["status"] = {
                    "phase": "Pending",
                    "conditions": [{"type": "PodScheduled", "status": "True"}],
                    "containerStatuses": [
                        {
                            "name": c["name"],
                            "ready": False,
                            "restartCount": 0,
                            "state": {"waiting": {"reason": "ContainerCreating"}},
                        }
                        for c in pod["spec"].get("containers") or []
                    ],
                }
                pod["metadata"]["resourceVersion"] = self._next_rv()
                md = pod["metadata"]
                self._event(
                    pod,
                    "Scheduled",
                    f"Successfully assigned {md['namespace']}/{md['name']} to {n['metadata']['name']}",
                    source="default-scheduler",
                )
                return
            reasons[why] = reasons.get(why, 0) + 1
        msg = (
            f"0/{len(nodes)} nodes are available: "
            + ", ".join(f"{c} {r}" for r, c in sorted(reasons.items()))
            + f". preemption: 0/{len(nodes)} nodes are available: {len(nodes)} Preemption is not helpful for "
            f"scheduling."
        )
        pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}],
        }
        self._event(pod, "FailedScheduling", msg, source="default-scheduler", warning=True)

    def _advance_pod(self, pod: dict, *, role: str = "") -> None:
        if not pod["spec"].get("nodeName"):
            self._schedule(pod)
            return
        if pod.get("status", {}).get("phase") == "Running" and not pod.get("_pending_ready"):
            return
        if time.monotonic() - pod.get("_bound", 0) < self.o["delay_s"]:
            return
        if "_pull_t" not in pod:  # the kubelet starts pulling the images delay_s after the pod was bound
            pod["_pull_t"] = pod.get("_bound", 0) + self.o["delay_s"]
            for c in pod["spec"].get("containers") or []:
                self._event(pod, "Pulling", f'Pulling image "{c.get("image", "")}"')
        if time.monotonic() - pod["_pull_t"] < self.o["pull_s"]:
            return
        if not pod.get("_started_events"):
            pod["_started_events"] = True
            self._pull_and_start_events(pod)
        image = " ".join(c.get("image", "") for c in pod["spec"].get("containers") or [])
        crash, unpullable = self.o["plugin_crash"], self.o["image_pull_fail"]
        if unpullable and unpullable in image:  # the kubelet's words when the registry has no such tag
            self._set_running(
                pod, ready=False, waiting=("ImagePullBackOff", f'Back-off pulling image "{image}"'), restarts=0
            )
            pod["status"]["phase"] = "Pending"  # no container has started
        elif crash and "device-plugin" in image and crash in image:
            self._set_running(
                pod, ready=False, waiting=("CrashLoopBackOff", "back-off 5m0s restarting failed container"), restarts=5
            )
        elif role == "head" and self.o["head_never_ready"]:
            self._set_running(
                pod, ready=False, restarts=3, last_exit={"reason": "Error", "exitCode": 1, "finishedAt": _now()}
            )
        else:
            self._set_running(pod, ready=True)
        pod["metadata"]["resourceVersion"] = self._next_rv()

    # ---- controllers -----------------------------------------------------------------------
    def reconcile(self) -> None:
        with self.lock:
            self._daemonsets()
            self._deployments()
            self._kuberay()
            for p in self.list("v1", "pods"):
                if p.get("status", {}).get("phase") != "Running":
                    role = (p["metadata"].get("labels") or {}).get("ray.io/node-type", "")
                    self._advance_pod(p, role=role)
            self._devices()
            self._statuses()

    def _owned(self, owner: dict) -> list[dict]:
        uid = owner["metadata"]["uid"]
        return [
            p
            for p in self.list("v1", "pods")
            if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
        ]

    def _daemonsets(self) -> None:
        for ds in self.list("apps/v1", "daemonsets"):
            tmpl = ds["spec"]["template"]
            pods = {p["spec"].get("nodeName"): p for p in self._owned(ds)}
            desired = 0
            for n in self.list("v1", "nodes"):
                nn = n["metadata"]["name"]
                ok = _affinity_ok(tmpl["spec"], _node_labels(n)) and not _untolerated(tmpl["spec"], n)
                if ok:
                    desired += 1
                    if nn not in pods:
                        h = hashlib.sha1(nn.encode()).hexdigest()[:5]
                        pod = self._new_pod(ds["metadata"]["namespace"], f"{ds['metadata']['name']}-{h}", tmpl, ds)
                        pod["spec"]["nodeName"] = nn
                        pod["_bound"] = ds.get("_t", time.monotonic())
                        self._advance_pod(pod)
                elif nn in pods:
                    self.remove("v1", "pods", pods[nn]["metadata"]["namespace"], pods[nn]["metadata"]["name"])
            ds["_desired"] = desired

    def _deployments(self) -> None:
        for dep in self.list("apps/v1", "deployments"):
            pods = self._owned(dep)
            for _ in range(int(dep["spec"].get("replicas", 1)) - len(pods)):
                pod = self._new_pod(
                    dep["metadata"]["namespace"],
                    f"{dep['metadata']['name']}-{_rand(9)}-{_rand()}",
                    dep["spec"]["template"],
                    dep,
                )
                if dep.get("_t", 0) < time.monotonic() - 3000:  # preinstalled: already running
                    pod["_bound"] = dep["_t"]
                self._schedule(pod)
                if dep.get("_t", 0) < time.monotonic() - 3000 and pod["spec"].get("nodeName"):
                    pod["_bound"] = dep["_t"]

    def _operator_ready(self) -> bool:
        for dep in self.list("apps/v1", "deployments"):
            if (dep["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "kuberay-operator":
                return any(
                    p.get("status", {}).get("phase") == "Running"
                    and any(
                        c.get("type") == "Ready" and c.get("status") == "True"
                        for c in p["status"].get("conditions") or []
                    )
                    for p in self._owned(dep)
                )
        return False

    def _kuberay(self) -> None:
        """KubeRay v1.7.0's operator (tests/fakes/k8s_standin/kuberay.py): a RayJob's RayCluster, a RayCluster's
        auth Secret, head and worker pods labelled as the operator labels them."""
        if self.kind_info("ray.io/v1", "rayclusters") is None or not self._operator_ready():
            return
        self._rayjobs()
        for rc in self.list("ray.io/v1", "rayclusters"):
            name, ns = rc["metadata"]["name"], rc["metadata"]["namespace"]
            self._auth_secret(rc)
            pods = self._owned(rc)
            heads = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
            if not heads:
                head = rc["spec"]["headGroupSpec"]
                labels = kuberay.pod_labels(name, "head", kuberay.HEAD_GROUP, head)
                self._new_pod(ns, f"{name}-head-{_rand()}", head["template"], rc, labels)
            for g in rc["spec"].get("workerGroupSpecs") or []:
                mine = [p for p in pods if p["metadata"]["labels"].get("ray.io/group") == g["groupName"]]
                for _ in range(int(g.get("replicas", 0)) - len(mine)):
                    labels = kuberay.pod_labels(name, "worker", g["groupName"], g)
                    self._new_pod(ns, f"{name}-{g['groupName']}-worker-{_rand()}", g["template"], rc, labels)

    def _rayjobs(self) -> None:
        """rayjob_controller.go: a new RayJob gets ``status.rayClusterName`` (``<name>-<5 random characters>``
        unless ``clusterSelector`` names a cluster) and ``jobDeploymentStatus: Initializing``
        (initRayJobStatusIfNeed; ``jobStatus`` stays ``JobStatusNew``, the empty string, rayjob_types.go), and the
        RayCluster of its ``rayClusterSpec``, owned by it (constructRayClusterForRayJob). The submitter Job and the
        job's run are not modelled."""
        if self.kind_info("ray.io/v1", "rayjobs") is None:
            return
        for rj in self.list("ray.io/v1", "rayjobs"):
            status = rj.setdefault("status", {})
            if not status.get("rayClusterName"):
                status.update(rayClusterName=kuberay.rayjob_cluster_name(rj), jobDeploymentStatus="Initializing")
            selected = (rj["spec"].get("clusterSelector") or {}).get("ray.io/cluster")
            ns, name = rj["metadata"]["namespace"], status["rayClusterName"]
            if not selected and rj["spec"].get("rayClusterSpec") and not self.get("ray.io/v1", "rayclusters", ns, name):
                self.put(kuberay.rayjob_cluster(rj, name), plural="rayclusters")

    def _auth_secret(self, rc: dict) -> None:
        """As KubeRay v1.7.0's reconcileAuthSecret: with ``authOptions.mode: token`` and no ``secretName``, a Secret
        named after the cluster (CheckName: its last 50 characters) holding a random ``auth_token``, owned by the
        RayCluster and labelled ``ray.io/cluster``; an existing one is kept."""
        auth = rc["spec"].get("authOptions") or {}
        if auth.get("mode", "token") != "token" or not auth or auth.get("secretName"):
            return
        name, ns = rc["metadata"]["name"][-50:], rc["metadata"]["namespace"]
        if self.get("v1", "secrets", ns, name) is None:
            raw = (self.o["ray_token"]() if self.o["ray_token"] else None) or _rand(32)
            token = base64.b64encode(raw.encode()).decode()
            owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": rc["metadata"]["name"]}
            owner.update(uid=rc["metadata"]["uid"], controller=True)
            md = {"name": name, "namespace": ns, "labels": {"ray.io/cluster": rc["metadata"]["name"]}}
            md["ownerReferences"] = [owner]
            self.put(
                {"apiVersion": "v1", "kind": "Secret", "metadata": md, "type": "Opaque", "data": {"auth_token": token}}
            )

    def ray_tokens(self) -> set[str]:
        """The tokens of every RayCluster's auth Secret (the fake dashboard accepts any of them)."""
        out = set()
        for sec in self.list("v1", "secrets"):
            if "ray.io/cluster" in (sec["metadata"].get("labels") or {}) and "auth_token" in (sec.get("data") or {}):
                out.add(base64.b64decode(sec["data"]["auth_token"]).decode())
        return out

    def _devices(self) -> None:
        adv: dict[str, dict[str, int]] = {}
        for p in self.list("v1", "pods", "kube-system"):
            nn = p["spec"].get("nodeName")
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in p.get("status", {}).get("conditions") or []
            )
            if not nn or not ready:
                continue
            image = " ".join(c.get("image", "") for c in p["spec"].get("containers") or [])
            if "k8s-device-plugin" in image and "nvidia" in image:
                adv.setdefault(nn, {})["nvidia.com/gpu"] = self.hw.get(nn, {}).get("gpus", 0)
            if "efa-k8s-device-plugin" in image:
                adv.setdefault(nn, {})["vpc.amazonaws.com/efa"] = self.hw.get(nn, {}).get("efa", 0)
        for n in self.list("v1", "nodes"):
            nn = n["metadata"]["name"]
            for res in ("nvidia.com/gpu", "vpc.amazonaws.com/efa"):
                for part in ("allocatable", "capacity"):
                    if res in adv.get(nn, {}):
                        n["status"][part][res] = str(adv[nn][res])
                    elif res in n["status"][part]:
                        n["status"][part][res] = "0"  # the kubelet keeps the resource at 0 once registered

    def _statuses(self) -> None:
        def is_ready(p):
            return any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in p.get("status", {}).get("conditions") or []
            )

        for ds in self.list("apps/v1", "daemonsets"):
            pods = self._owned(ds)
            ready = sum(1 for p in pods if is_ready(p))
            ds["status"] = {
                "currentNumberScheduled": len(pods),
                "desiredNumberScheduled": ds.get("_desired", 0),
                "numberMisscheduled": 0,
                "numberReady": ready,
                "numberAvailable": ready,
                "updatedNumberScheduled": len(pods),
                "observedGeneration": ds["metadata"].get("generation", 1),
            }
        for dep in self.list("apps/v1", "deployments"):
            pods = self._owned(dep)
            ready = sum(1 for p in pods if is_ready(p))
            dep["status"] = {
                "replicas": len(pods),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "updatedReplicas": len(pods),
                "observedGeneration": dep["metadata"].get("generation", 1),
            }
        for rc in self.list("ray.io/v1", "rayclusters") if self.kind_info("ray.io/v1", "rayclusters") else []:
            pods = self._owned(rc)
            workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
            want = sum(int(g.get("replicas", 0)) for g in rc["spec"].get("workerGroupSpecs") or [])
            all_ready = pods and all(is_ready(p) for p in pods) and len(workers) >= want
            rc["status"] = {
                "state": "ready" if all_ready else "",
                "desiredWorkerReplicas": want,
                "readyWorkerReplicas": sum(1 for p in workers if is_ready(p)),
                "availableWorkerReplicas": sum(1 for p in workers if is_ready(p)),
                "observedGeneration": rc["metadata"].get("generation", 1),
            }

    # ---- exec ------------------------------------------------------------------------------
    def files_of(self, pod: dict) -> dict[str, str]:
        """The files a pod's exec can read: ``files`` (every pod) plus ``pod_files`` for this pod, keyed
        by the pod's name or by the node it runs on (a callable ``pod -> {path: text}`` also works)."""
        out = dict(self.o["files"] or {})
        pf = self.o["pod_files"]
        if callable(pf):
            out.update(pf(copy.deepcopy(pod)) or {})
        elif pf:
            out.update(pf.get(pod["spec"].get("nodeName") or "", {}))
            out.update(pf.get(pod["metadata"]["name"], {}))
        return out

    def admit_pod(self, pod: dict) -> None:
        """EKS Pod Identity's mutating webhook (``eks-pod-identity-webhook``), at the pod's creation: a pod whose
        ServiceAccount has an association gets :data:`POD_IDENTITY_ENV` in every container; one created before the
        association is effective gets nothing, and keeps nothing (the webhook never edits a running pod)."""
        spec = pod.get("spec") or {}
        sa = spec.get("serviceAccountName")
        opt = self.o["pod_identity"]
        ns = pod["metadata"].get("namespace", "default")
        role = (opt(ns, sa) if callable(opt) else association_role(ns, sa)) if sa and opt else None
        if role:
            for c in spec.get("containers") or []:
                env = [e for e in c.get("env") or [] if e.get("name") not in POD_IDENTITY_ENV]
                c["env"] = env + [{"name": k, "value": v} for k, v in POD_IDENTITY_ENV.items()]
        role = role or self.o["node_role"]
        if role:  # the session the pod's SDK will get, taken now (a test may enforce IAM later)
            try:
                pod["_aws_env"] = assumed_role_env(role, pod["metadata"]["name"])
            except Exception:  # noqa: BLE001 - no STS there: the pod runs with this process's credentials
                pod["_aws_env"] = {}

    def credentials_for(self, pod: dict) -> dict[str, str]:
        """The credentials the AWS SDK in ``pod`` ends up with: with Pod Identity's variables, the associated role's
        session (the agent at 169.254.170.23 assumes it: here STS AssumeRole on the AWS endpoint this process uses,
        when the pod is created); without them, ``node_role``'s (the SDK falls back to the instance metadata) when
        set, else this process's."""
        return dict(pod.get("_aws_env") or {})

    def run_python(self, pod: dict, program: str, args: list[str]) -> tuple[str, str, int]:
        """``python3 -c PROGRAM ARGS...``: run for real on this machine, in this process's environment (e.g. a
        moto server's ``AWS_ENDPOINT_URL`` and fake credentials) with the container's literal env on top, and the
        credentials of the pod's identity (:meth:`credentials_for`)."""
        import subprocess

        container = ((pod.get("spec") or {}).get("containers") or [{}])[0]
        env = dict(os.environ)
        env.update({e["name"]: e["value"] for e in container.get("env") or [] if "value" in e})
        creds = self.credentials_for(pod)
        if creds:
            env = {k: v for k, v in env.items() if k not in ("AWS_PROFILE", "AWS_SESSION_TOKEN")} | creds
        try:
            done = subprocess.run(
                [sys.executable, "-c", program, *args], env=env, capture_output=True, text=True, timeout=60
            )
        except subprocess.TimeoutExpired:
            return "", "python3: timed out\n", 124
        return done.stdout, done.stderr, done.returncode

    def _nvidia_smi(self, pod: dict) -> tuple[str, str, int]:
        """``nvidia-smi --query-gpu=driver_version --format=csv,noheader``: one line per GPU of the pod's node, in a
        container the NVIDIA runtime gave the driver's utilities (``NVIDIA_VISIBLE_DEVICES`` set; NVIDIA/
        nvidia-container-toolkit v1.20.0: ``utility`` is in the default capabilities); elsewhere not found."""
        container = ((pod.get("spec") or {}).get("containers") or [{}])[0]
        if not any(e.get("name") == "NVIDIA_VISIBLE_DEVICES" for e in container.get("env") or []):
            return "", "sh: 1: nvidia-smi: not found\n", 127
        node = (pod.get("spec") or {}).get("nodeName", "")
        driver = self.o["nvidia_driver"]
        version = driver.get(node, "580.95.05") if isinstance(driver, dict) else driver
        gpus = max(1, self.hw.get(node, {}).get("gpus", 0))
        return f"{version}\n" * gpus, "", 0

    def run_exec(self, pod: dict, argv: list[str]) -> tuple[str, str, int]:
        self.exec_log.append((pod["metadata"]["name"], list(argv)))
        if self.o["exec_handler"]:
            res = self.o["exec_handler"](copy.deepcopy(pod), list(argv))
            if res is not None:
                return res
        if argv[:2] in (["python3", "-c"], ["python", "-c"]) and len(argv) > 2:
            return self.run_python(pod, argv[2], argv[3:])
        cmd = (
            argv[2]
            if argv[:2] in (["/bin/sh", "-c"], ["sh", "-c"], ["/bin/bash", "-c"]) and len(argv) > 2
            else " ".join(argv)
        )
        cmd = cmd.strip()
        # `PATH="$PATH:DIR"; export PATH; exec PROG ARGS`: the shell runs PROG (the stand-in's pods have on PATH every
        # program the stand-in knows)
        cmd = re.sub(r'^PATH="\$PATH:[^"]*"; export PATH; exec ', "", cmd)
        files = self.files_of(pod)
        if cmd.startswith("fi_info") and "efa" in cmd:
            wants_efa = _pod_requests(pod).get("vpc.amazonaws.com/efa", 0) > 0
            if wants_efa:
                out = "".join(
                    f"provider: efa\n    fabric: efa\n    domain: rdmap{i}s0-rdm\n    version: 203.10\n"
                    f"    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n"
                    for i in range(1)
                )
                return out, "", 0
            return "", "fi_getinfo: -61 (No data available)\n", 1
        if cmd == "hostname":
            return pod["metadata"]["name"] + "\n", "", 0
        if argv == ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]:
            return self._nvidia_smi(pod)
        if cmd.startswith("echo "):
            return cmd[5:].strip("'\"") + "\n", "", 0
        listing = _LISTING.search(cmd) if argv[:2] in (["/bin/sh", "-c"], ["sh", "-c"]) else None
        if listing:
            # `sh -c 'for f in $G; do ... grep -qF -e "$N" "$f" ... M/F ...' NAME ARGS...`: list the files the
            # glob matches, each tagged M (holds the needle) or F, as the real shell would in the pod
            pos = argv[3:]  # $0, $1, ...
            g, n = int(listing.group(1)), int(listing.group(2))
            if len(pos) <= max(g, n):
                return "", "sh: parameter not set\n", 2
            pattern, needle = pos[g], pos[n]
            out = "".join(
                f"{'M' if needle in files[p] else 'F'}\t{p}\n" for p in sorted(files) if _glob_match(p, pattern)
            )
            return out, "", 0
        words = argv if argv[:1] == ["cat"] else cmd.split()
        if words[:1] == ["cat"]:
            paths = [w for w in words[1:] if w != "--"]
            if len(paths) != 1:
                return "", "cat: the stand-in reads one file\n", 1
            path = paths[0]
            if path in files:
                return files[path], "", 0
            return "", f"cat: {path}: No such file or directory\n", 1
        m = re.fullmatch(r"exit (\d+)", cmd)
        if m:
            return "", "", int(m.group(1))
        return "", f"sh: 1: {cmd.split()[0] if cmd else ''}: not found\n", 127


# ============================================================================================
# Websocket framing (RFC 6455, server side)
# ============================================================================================


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("websocket closed")
        buf += chunk
    return buf


def ws_read(sock: socket.socket) -> tuple[int, bytes]:
    b1, b2 = _recv_exact(sock, 2)
    opcode, masked, length = b1 & 0x0F, b2 & 0x80, b2 & 0x7F
    if length == 126:
        length = struct.unpack(">H", _recv_exact(sock, 2))[0]
    elif length == 127:
        length = struct.unpack(">Q", _recv_exact(sock, 8))[0]
    mask = _recv_exact(sock, 4) if masked else b""
    data = _recv_exact(sock, length) if length else b""
    if masked:
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return opcode, data


def ws_write(sock: socket.socket, opcode: int, payload: bytes) -> None:
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack(">H", n)
    else:
        head += bytes([127]) + struct.pack(">Q", n)
    sock.sendall(head + payload)


# ============================================================================================
# HTTP
# ============================================================================================

#: The listing loop of raytrain_helpers.nccl.collect_pod_logs (any positional parameter numbers).
_LISTING = re.compile(r'^for f in \$(\d); do .*grep -qF -e "\$(\d)" "\$f"', re.S)


def _glob_match(path: str, pattern: str) -> bool:
    """The shell's pathname expansion for one path: wildcards never cross '/', '*' skips dot files."""
    ps, gs = path.split("/"), pattern.split("/")
    return len(ps) == len(gs) and all(
        fnmatch.fnmatchcase(p, g) and not (p.startswith(".") and not g.startswith("."))
        for p, g in zip(ps, gs, strict=True)
    )


_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+)(?=/))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    rbufsize = 0  # unbuffered: websocket relays select() on the raw socket
    disable_nagle_algorithm = True
    server_version = "k8s-standin/1.0"
    cluster: Cluster  # set on the subclass made per server

    def log_message(self, fmt, *args):  # quiet
        pass

    # ---- plumbing --------------------------------------------------------------------------
    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return _recv_exact(self.connection, n) if n else b""

    @staticmethod
    def _public(obj: dict) -> dict:
        return {k: v for k, v in obj.items() if not k.startswith("_")}

    def do_GET(self):
        self._handle("GET")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def _handle(self, method: str) -> None:
        c = self.cluster
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        body = self._body() if method in ("PATCH", "POST", "PUT", "DELETE") else b""
        c.requests.append((method, self.path))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._send(401, _status(401, "Unauthorized"))
        try:
            if url.path == "/version":
                return self._send(
                    200, {"major": "1", "minor": "36", "gitVersion": KUBERNETES_VERSION, "platform": "linux/amd64"}
                )
            m = _PATH.match(url.path)
            if not m:
                raise ApiError(404, "the server could not find the requested resource")
            gv = "v1" if m.group("core") else f"{m.group('group')}/{m.group('version')}"
            ns, plural, name, sub = m.group("ns"), m.group("plural"), m.group("name"), m.group("sub")
            with c.lock:
                c.reconcile()
                info = c.kind_info(gv, plural)
                if info is None:
                    raise ApiError(404, "the server could not find the requested resource")
                kind, namespaced = info
                if sub in ("exec", "portforward") and plural == "pods" and method in ("GET", "POST"):
                    pod = c.get("v1", "pods", ns, name)
                    if pod is None:
                        raise ApiError(404, f'pods "{name}" not found')
                    if pod.get("status", {}).get("phase") != "Running":
                        raise ApiError(400, f"pod {name} is not running (phase {pod['status'].get('phase')})")
                    pod = copy.deepcopy(pod)
                if sub not in (None, "status", "exec", "portforward"):
                    raise ApiError(404, f"subresource {sub} is not served by the stand-in")
                if sub is None or sub == "status":
                    result = self._crud(method, gv, plural, kind, namespaced, ns, name, query, body)
            if sub == "exec":
                return self._exec(pod, query)
            if sub == "portforward":
                return self._portforward(pod, query)
            code, payload = result
            return self._send(code, payload)
        except ApiError as e:
            return self._send(e.code, _status(e.code, str(e)))
        except Exception as e:  # a stand-in bug must be visible, not a hang
            return self._send(500, _status(500, f"stand-in error: {type(e).__name__}: {e}"))

    # ---- CRUD ------------------------------------------------------------------------------
    def _crud(self, method, gv, plural, kind, namespaced, ns, name, query, body):
        if namespaced and ns is None and name is not None:
            raise ApiError(404, "the server could not find the requested resource")
        if method == "GET":
            return self._get(gv, plural, kind, namespaced, ns, name, query)
        if method == "PATCH":
            obj = self._apply_body(gv, kind, namespaced, ns, name, query, body)
            return self._apply(obj, gv, plural, kind, namespaced, ns, name, query)
        if method == "DELETE":
            return self._delete(gv, plural, ns, name)
        raise ApiError(405, f"{method} is not served by the stand-in")

    def _get(self, gv, plural, kind, namespaced, ns, name, query):
        c = self.cluster
        if name is None:
            items = c.list(gv, plural, ns if namespaced else None)
            ls = (query.get("labelSelector") or [""])[0]
            fs = (query.get("fieldSelector") or [""])[0]
            items = [
                self._public(o)
                for o in items
                if label_selector_matches(ls, o["metadata"].get("labels") or {}) and field_selector_matches(fs, o)
            ]
            return 200, {
                "kind": f"{kind}List",
                "apiVersion": gv,
                "metadata": {"resourceVersion": str(c.rv)},
                "items": items,
            }
        obj = c.get(gv, plural, ns or "", name)
        if obj is None:
            raise ApiError(404, f'{plural} "{name}" not found')
        return 200, self._public(obj)

    def _apply_body(self, gv, kind, namespaced, ns, name, query, body) -> dict:
        """The checked object of a server-side apply request."""
        c = self.cluster
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype != "application/apply-patch+yaml":
            raise ApiError(415, f"the stand-in only serves server-side apply, not {ctype!r}")
        if not (query.get("fieldManager") or [""])[0]:
            raise ApiError(400, "PATCH, fieldManager: Required value: is required for apply patch")
        try:
            text = body.decode()
            try:
                obj = json.loads(text)
            except ValueError:
                obj = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as e:
            raise ApiError(400, f"error decoding YAML: {e}") from None
        if not isinstance(obj, dict):
            raise ApiError(400, "the body is not an object")
        if obj.get("apiVersion") != gv or obj.get("kind") != kind:
            raise ApiError(
                400, f"the body's {obj.get('apiVersion')}/{obj.get('kind')} does not match the path ({gv}/{kind})"
            )
        md = obj.get("metadata") or {}
        if md.get("name") != name:
            raise ApiError(
                400, f"the name of the object ({md.get('name')}) does not match the name on the URL ({name})"
            )
        if namespaced:
            if md.get("namespace", ns) != ns:
                raise ApiError(400, "the namespace of the object does not match the namespace on the URL")
            if c.get("v1", "namespaces", "", ns) is None:
                raise ApiError(404, f'namespaces "{ns}" not found')
        return obj

    def _apply(self, obj, gv, plural, kind, namespaced, ns, name, query):
        c = self.cluster
        md = obj.get("metadata") or {}
        self._validate(gv, plural, kind, obj)
        manager = query["fieldManager"][0]
        existing = c.get(gv, plural, ns or "", name)
        new = copy.deepcopy(obj)
        new["metadata"] = dict(md)
        if namespaced:
            new["metadata"]["namespace"] = ns
        if existing is not None:
            for k in ("uid", "creationTimestamp", "ownerReferences"):
                if k in existing["metadata"]:
                    new["metadata"][k] = existing["metadata"][k]
            gen = existing["metadata"].get("generation", 1)
            new["metadata"]["generation"] = gen + (1 if existing.get("spec") != new.get("spec") else 0)
            for k, v in existing.items():
                if k.startswith("_") or k == "status":
                    new[k] = v
            if kind == "Node":
                new["status"] = existing.get("status")
        new["metadata"]["managedFields"] = [{"manager": manager, "operation": "Apply", "time": _now()}]
        if kind == "Pod" and existing is None:
            c.admit_pod(new)  # the admission webhooks run on a pod's creation only
        c.put(new, plural=plural)
        if existing is None:
            new["_t"] = time.monotonic()
        c.applied.append((kind, ns or "", name))
        c.reconcile()
        return (200 if existing is not None else 201), self._public(new)

    def _delete(self, gv, plural, ns, name):
        c = self.cluster
        if name is None:
            raise ApiError(405, "collection deletion is not served by the stand-in")
        obj = c.remove(gv, plural, ns or "", name)
        if obj is None:
            raise ApiError(404, f'{plural} "{name}" not found')
        c.reconcile()
        return 200, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "kind": plural},
        }

    def _validate(self, gv: str, plural: str, kind: str, obj: dict) -> None:
        """Custom resources against their CRD's openAPIV3Schema when the CRD carries one (as the API server)."""
        group, _, version = gv.rpartition("/")
        if not group or kind == "CustomResourceDefinition":
            return
        for crd in self.cluster.list("apiextensions.k8s.io/v1", "customresourcedefinitions"):
            s = crd.get("spec") or {}
            if s.get("group") != group or s.get("names", {}).get("plural") != plural:
                continue
            for v in s.get("versions") or []:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                if v.get("name") == version and schema:
                    import jsonschema

                    cache = crd.setdefault("_validators", {})
                    if version not in cache:
                        cache[version] = jsonschema.Draft7Validator(schema)
                    errs = sorted(cache[version].iter_errors(obj), key=lambda e: list(e.path))
                    if errs:
                        e = errs[0]
                        raise ApiError(
                            422,
                            f'{kind}.{group} "{obj["metadata"]["name"]}" is invalid: '
                            f"{'.'.join(map(str, e.path))}: {e.message}",
                        )

    # ---- websocket subresources --------------------------------------------------------------
    def _upgrade(self) -> bool:
        if (self.headers.get("Upgrade") or "").lower() != "websocket":
            self._send(400, _status(400, "Upgrade request required"))
            return False
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        self.end_headers()
        self.close_connection = True
        return True

    def _close_ws(self) -> None:
        with contextlib.suppress(OSError):
            ws_write(self.connection, 0x8, struct.pack(">H", 1000))

    def _exec(self, pod: dict, query: dict) -> None:
        argv = query.get("command") or []
        if not argv:
            return self._send(400, _status(400, "you must specify at least 1 command"))
        if not self._upgrade():
            return
        out, err, rc = self.cluster.run_exec(pod, argv)
        sock = self.connection
        if out:
            ws_write(sock, 0x2, b"\x01" + out.encode())
        if err:
            ws_write(sock, 0x2, b"\x02" + err.encode())
        status = (
            {"metadata": {}, "status": "Success"}
            if rc == 0
            else {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: {rc}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]},
            }
        )
        ws_write(sock, 0x2, b"\x03" + json.dumps(status).encode())
        self._close_ws()

    def _portforward(self, pod: dict, query: dict) -> None:
        ports = [int(p) for p in ",".join(query.get("ports") or []).split(",") if p]
        if len(ports) != 1:
            return self._send(400, _status(400, "the stand-in forwards exactly one port"))
        port = ports[0]
        c = self.cluster
        c.portforwards.append((pod["metadata"]["name"], port))
        if not self._upgrade():
            return
        sock = self.connection
        lo_hi = struct.pack("<H", port)
        ws_write(sock, 0x2, b"\x00" + lo_hi)
        ws_write(sock, 0x2, b"\x01" + lo_hi)
        role = (pod["metadata"].get("labels") or {}).get("ray.io/node-type")
        target = c.dashboard_addr if (role == "head" and port == 8265) else None
        if target is None:
            ws_write(
                sock,
                0x2,
                b"\x01" + f"error forwarding port {port} to pod {pod['metadata']['name']}: connection refused".encode(),
            )
            return self._close_ws()
        try:
            up = socket.create_connection(target, timeout=5)
        except OSError as e:
            ws_write(sock, 0x2, b"\x01" + f"error forwarding port {port}: {e}".encode())
            return self._close_ws()
        try:
            while True:
                r, _, _ = select.select([sock, up], [], [], 30)
                if not r:
                    break
                if sock in r:
                    op, data = ws_read(sock)
                    if op == 0x8:
                        break
                    if op == 0x9:
                        ws_write(sock, 0xA, data)
                    elif op == 0x2 and data:
                        if data[0] == 0 and len(data) > 1:
                            up.sendall(data[1:])
                if up in r:
                    chunk = up.recv(65536)
                    if not chunk:
                        self._close_ws()
                        break
                    ws_write(sock, 0x2, b"\x00" + chunk)
        except (ConnectionError, OSError):
            pass
        finally:
            up.close()


# ============================================================================================
# The fake Ray dashboard behind the head's 8265
# ============================================================================================


class _Dashboard(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    ray_version = "2.58.0"

    def log_message(self, fmt, *args):
        pass

    #: The stand-in's cluster: with a RayCluster's token Secret present, requests need that token, as Ray's
    #: dashboard under token authentication (ray 2.58 dashboard/http_server_head.py, token_auth_middleware).
    cluster = None
    public = ("/api/healthz", "/api/authentication_mode")

    def _refused(self) -> int:
        tokens = self.cluster.ray_tokens() if self.cluster is not None else set()
        if not tokens or self.path in self.public:
            return 0
        header = self.headers.get("Authorization") or self.headers.get("X-Ray-Authorization") or ""
        if not header:
            return 401
        return 0 if header.removeprefix("Bearer ").strip() in tokens else 403

    def do_GET(self):
        refused = self._refused()
        if refused:
            data = b"Unauthorized: Missing authentication token" if refused == 401 else b"Forbidden: Invalid token"
            self.send_response(refused)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.path.startswith("/api/version"):
            body = {
                "version": "4",
                "ray_version": self.ray_version,
                "ray_commit": "standin",
                "session_name": "session_standin",
            }
        elif self.path.startswith("/api/jobs/"):
            body = []
        else:
            body = {"result": True, "msg": "stand-in dashboard", "path": self.path}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


# ============================================================================================
# The public handle
# ============================================================================================


class StandIn:
    """A running stand-in: ``.url``, ``.kubeconfig`` (a file), ``.cluster`` (the state, for assertions)."""

    def __init__(
        self,
        scenario: str = "healthy",
        *,
        workdir: str | os.PathLike | None = None,
        set_env: bool = False,
        **options: Any,
    ):
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}: one of {', '.join(SCENARIOS)}")
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown stand-in options {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        self.scenario = scenario
        self.options = {**DEFAULTS, **SCENARIOS[scenario], **options}
        self._workdir = workdir
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._set_env = set_env
        self._old_env: str | None = None
        self.cluster = Cluster(self.options)
        self._servers: list[_Server] = []

    def start(self) -> StandIn:
        handler = type("BoundHandler", (Handler,), {"cluster": self.cluster})
        srv = _Server(("127.0.0.1", 0), handler)
        self._servers.append(srv)
        threading.Thread(
            target=srv.serve_forever, kwargs={"poll_interval": 0.05}, name="k8s-standin", daemon=True
        ).start()
        self.url = f"http://127.0.0.1:{srv.server_address[1]}"
        up = self.options["dashboard_upstream"]
        if up:
            host, port = up.rsplit(":", 1)
            self.cluster.dashboard_addr = (host, int(port))
        else:
            dash = _Server(
                ("127.0.0.1", 0),
                type("Dash", (_Dashboard,), {"ray_version": self.options["ray_version"], "cluster": self.cluster}),
            )
            self._servers.append(dash)
            threading.Thread(
                target=dash.serve_forever, kwargs={"poll_interval": 0.05}, name="k8s-standin-dashboard", daemon=True
            ).start()
            self.cluster.dashboard_addr = ("127.0.0.1", dash.server_address[1])
        if self._workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="k8s-standin-")
            self._workdir = self._tmp.name
        self.kubeconfig = str(Path(self._workdir) / "kubeconfig")
        self.write_kubeconfig(self.kubeconfig)
        if self._set_env:
            self._old_env = os.environ.get("KUBECONFIG")
            os.environ["KUBECONFIG"] = self.kubeconfig
            self._old_path = os.environ.get("PATH", "")
            if self.options["helm"]:
                from tests.fakes import helm as fake_helm

                bin_dir = fake_helm.install(Path(self._workdir) / "bin")
                os.environ["PATH"] = f"{bin_dir}{os.pathsep}{self._old_path}"
                self._unpin = fake_helm.pin_fake_archives()  # the fake's archives are not the publishers'
        return self

    def write_kubeconfig(self, path: str | os.PathLike) -> str:
        ctx = self.options["context"]
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": ctx,
            "clusters": [{"name": ctx, "cluster": {"server": self.url}}],
            "users": [{"name": "standin", "user": {"token": TOKEN}}],
            "contexts": [{"name": ctx, "context": {"cluster": ctx, "user": "standin"}}],
        }
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(yaml.safe_dump(doc, sort_keys=False))
        return str(path)

    def stop(self) -> None:
        for s in self._servers:
            s.shutdown()
            s.server_close()
        self._servers.clear()
        if self._set_env:
            if self._old_env is None:
                os.environ.pop("KUBECONFIG", None)
            else:
                os.environ["KUBECONFIG"] = self._old_env
            os.environ["PATH"] = self._old_path
            if getattr(self, "_unpin", None):
                self._unpin()
                self._unpin = None
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- conveniences for assertions ---------------------------------------------------------
    def objects(self, gv: str, plural: str, ns: str | None = None) -> list[dict]:
        with self.cluster.lock:
            self.cluster.reconcile()
            return [copy.deepcopy(Handler._public(o)) for o in self.cluster.list(gv, plural, ns)]

    def get(self, gv: str, plural: str, name: str, ns: str = "") -> dict | None:
        with self.cluster.lock:
            self.cluster.reconcile()
            o = self.cluster.get(gv, plural, ns, name)
            return copy.deepcopy(Handler._public(o)) if o else None

    def gpu_nodes(self) -> list[str]:
        """The GPU nodes' names, in order (keys for ``pod_files``)."""
        return [
            n["metadata"]["name"]
            for n in self.objects("v1", "nodes")
            if self.cluster.hw.get(n["metadata"]["name"], {}).get("gpus")
        ]

    def serve_files(
        self,
        pod_files: dict[str, dict[str, str]] | Callable[[dict], dict[str, str]] | None = None,
        files: dict[str, str] | None = None,
    ) -> None:
        """Replace the files that exec's ``cat`` and listing read (``pod_files`` by node or pod name)."""
        with self.cluster.lock:
            self.cluster.o["pod_files"] = pod_files
            if files is not None:
                self.cluster.o["files"] = files

    def mutate(self, fn: Callable[[Cluster], None]) -> None:
        """Change the cluster under its lock (e.g. remove a taint mid-test)."""
        with self.cluster.lock:
            fn(self.cluster)
            self.cluster.reconcile()


RAY_LOGS = "/tmp/ray/session_latest/logs"


def ray_worker_logs(
    nccl_text: str, marker: str, nodes: list[str], *, job_id: str = "02000000", gpus_per_node: int | None = None
) -> dict[str, dict[str, str]]:
    """``pod_files`` for the GPU nodes' worker pods: an NCCL_DEBUG=INFO log (lines ``host:pid:tid [dev] NCCL
    ...``) laid out as Ray writes it - one ``worker-<id>-<job>-<pid>.out`` per training process under
    /tmp/ray/session_latest/logs of the pod on that process's node, opening with the training worker's
    ``[raytrain] marker=<marker> rank=<r>/<world>`` line, plus its ``.err`` sibling. Hosts are given to
    ``nodes`` in order of first appearance; rank = node index x GPUs per node + the device index."""
    per: dict[tuple[str, str], list[str]] = {}
    dev: dict[tuple[str, str], int] = {}
    hosts: list[str] = []
    for ln in nccl_text.splitlines():
        m = re.match(r"^([\w.-]+):(\d+):\d+ \[(\d+)\]", ln)
        if not m:
            continue
        host, pid = m.group(1), m.group(2)
        if host not in hosts:
            hosts.append(host)
        per.setdefault((host, pid), []).append(ln)
        dev.setdefault((host, pid), int(m.group(3)))
    if len(hosts) > len(nodes):
        raise ValueError(f"the log has {len(hosts)} hosts, only {len(nodes)} nodes were given")
    gpn = gpus_per_node or max(1, max((sum(1 for h, _ in per if h == x) for x in hosts), default=1))
    world = len(per)
    out: dict[str, dict[str, str]] = {n: {} for n in nodes}
    for (host, pid), lines in sorted(per.items()):
        i = hosts.index(host)
        rank = i * gpn + dev[(host, pid)]
        wid = hashlib.sha1(f"{marker}{host}{pid}".encode()).hexdigest()[:16]
        stem = f"{RAY_LOGS}/worker-{wid}-{job_id}-{pid}"
        out[nodes[i]][stem + ".out"] = (
            f":job_id:{job_id}\n:actor_name:RayTrainWorker\n[raytrain] marker={marker} "
            f"rank={rank}/{world} node={nodes[i]} host={host} pid={pid}\n" + "\n".join(lines) + "\n"
        )
        out[nodes[i]][stem + ".err"] = f":job_id:{job_id}\n:actor_name:RayTrainWorker\n"
    return out


@contextlib.contextmanager
def standin(scenario: str = "healthy", **kw: Any):
    s = StandIn(scenario, **kw)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run the Kubernetes API stand-in until interrupted.")
    ap.add_argument("--scenario", default="healthy", choices=sorted(SCENARIOS))
    ap.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig (set KUBECONFIG to it)")
    ap.add_argument("--gpu-node-count", type=int, default=DEFAULTS["gpu_node_count"])
    ap.add_argument("--gpu-node-type", default=DEFAULTS["gpu_node_type"], choices=sorted(HARDWARE))
    ap.add_argument("--delay", type=float, default=1.0, help="seconds each state change takes")
    ap.add_argument(
        "--dashboard-upstream",
        default=None,
        metavar="HOST:PORT",
        help="relay port-forwards to the head's 8265 here (e.g. a local Ray dashboard 127.0.0.1:8266)",
    )
    ap.add_argument("--crd-dir", default=None, help="load full CRDs (with schemas) from here when preinstalled")
    ap.add_argument(
        "--context",
        default=DEFAULTS["context"],
        help="the kubeconfig's context/cluster name (e.g. CLUSTER.REGION.eksctl.io, as eksctl writes)",
    )
    a = ap.parse_args(argv)
    s = StandIn(
        a.scenario,
        workdir=str(Path(a.kubeconfig).parent),
        gpu_node_count=a.gpu_node_count,
        gpu_node_type=a.gpu_node_type,
        delay_s=a.delay,
        dashboard_upstream=a.dashboard_upstream,
        crd_dir=a.crd_dir,
        context=a.context,
    )
    s.start()
    s.write_kubeconfig(a.kubeconfig)
    print(f"k8s stand-in ({a.scenario}) at {s.url}; KUBECONFIG={a.kubeconfig}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    s.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
