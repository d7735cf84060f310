"""``raytrain-tutorial check --target aws --existing-cluster``: what the tutorial needs from an EKS cluster it did not
create (``aws.existing_cluster``), read and put in the preflight's table, each row with its fix. Nothing is created.

Rows: the cluster and its Kubernetes version; the Kubernetes API through this cluster's kubeconfig context; the
KubeRay operator and its version; the NVIDIA and EFA device plugins; the GPU nodes' allocatable GPUs and EFA devices
(and the ``role: gpu-worker`` label the RayCluster's workers select); NetworkPolicy enforcement (:func:`network_policy`:
the Amazon VPC CNI's network policy agent is off unless the ``vpc-cni`` add-on's configuration sets
``enableNetworkPolicy: "true"``: aws/amazon-vpc-cni-k8s b5218838 charts/aws-vpc-cni/values.yaml, passed to the agent
as ``--enable-network-policy`` in templates/daemonset.yaml; the EKS add-on takes the chart's values as its
``configurationValues``, EKS User Guide "Restrict Pod network traffic with Kubernetes network policies"); the EKS Pod
Identity agent; the storage identity (the tutorial's bucket, role and association, or what of the same names is not
the tutorial's).
"""

from __future__ import annotations

from typing import Any

import yaml

from ...clients import aws as aws_client
from ...clients import kubernetes as kube
from ...core.settings import Settings
from ...core.validation import ConfigError
from ...plan import iam
from ...plan.kube_objects import node_row
from ...plan.plugins import CHARTS
from ..base import Requirement
from . import ownership
from .kuberay import operator as kuberay_operator
from .plugins import install as plugins
from .plugins import owners
from .storage import state as storage_state

UPDATE_KUBECONFIG = "aws eks update-kubeconfig --name {name} --region {region}"


VPC_CNI = "vpc-cni"
NETWORK_POLICY_KEY = "enableNetworkPolicy"


def network_policy(eks, settings: Settings) -> tuple[bool | None, str]:
    """(enforced, the plain words with the fix): True, False, or None when it cannot be read from EKS."""
    name = settings.aws.cluster_name
    fix = (
        f"Fix: `aws eks update-addon --cluster-name {name} --addon-name {VPC_CNI} --configuration-values "
        f'\'{{"{NETWORK_POLICY_KEY}": "true"}}\' --resolve-conflicts PRESERVE` (VPC CNI 1.14 or later), or a CNI '
        f"that enforces NetworkPolicies (Calico, Cilium)"
    )
    try:
        resp = aws_client.essential_call(
            eks, "describe_addon", absent=("ResourceNotFoundException",), clusterName=name, addonName=VPC_CNI
        )
    except aws_client.AwsCallError as e:
        return None, f"unknown: the {VPC_CNI} add-on could not be read ({e})"
    if resp is None:
        return None, (
            f"unknown: cluster {name} has no EKS {VPC_CNI} add-on (a self-managed CNI): EKS cannot say whether "
            f"NetworkPolicies are enforced; `kubectl -n kube-system get daemonset aws-node -o yaml` shows "
            f"--enable-network-policy. Without enforcement the namespace's default-deny NetworkPolicy is not "
            f"applied and any pod may reach the Ray head. {fix}"
        )
    values = _values((resp.get("addon") or {}).get("configurationValues"))
    on = str(values.get(NETWORK_POLICY_KEY, "false")).lower() == "true"
    if on:
        return True, f'enforced: the {VPC_CNI} add-on\'s configuration sets {NETWORK_POLICY_KEY}: "true"'
    return False, (
        f'NOT enforced: the {VPC_CNI} add-on\'s configuration does not set {NETWORK_POLICY_KEY}: "true", so the '
        f"tutorial's NetworkPolicies (default-deny ingress in the namespace) are accepted but not applied: any pod "
        f"may reach the Ray head and its dashboard. {fix}"
    )


def _values(text: Any) -> dict[str, Any]:
    """The add-on's configurationValues (JSON or YAML text, as EKS keeps them)."""
    if not text:
        return {}
    try:
        doc = yaml.safe_load(str(text))
    except yaml.YAMLError:
        return {}
    return doc if isinstance(doc, dict) else {}


def rows(settings: Settings, sess) -> list[Requirement]:
    """The cluster's rows (after the preflight's own): each found, needed, status and fix."""
    a = settings.aws
    eks = aws_client.client(sess, "eks", a.region)
    try:
        c = aws_client.describe_cluster(eks, a.cluster_name)
    except aws_client.AwsCallError as e:
        return [Requirement("EKS cluster", f"unreadable: {e}", "ACTIVE", "unknown", "see the message")]
    if c is None:
        return [Requirement("EKS cluster", f"no cluster {a.cluster_name} in {a.region}", "ACTIVE", "MISSING",
                            ownership.missing_existing(settings))]  # fmt: skip
    owner = "the tutorial's" if ownership.owned(c.get("tags"), settings) else "not created by the tutorial"
    out = [
        Requirement("EKS cluster", f"{a.cluster_name}: {c['status']} ({owner})", "ACTIVE",
                    "ok" if c["status"] == "ACTIVE" else "FAILED", "" if c["status"] == "ACTIVE" else
                    f"wait until it is ACTIVE: `aws eks describe-cluster --name {a.cluster_name}`"),
        Requirement("cluster Kubernetes version", str(c.get("version", "?")), f"{a.k8s_version} (aws.k8s_version)",
                    "ok" if str(c.get("version")) == a.k8s_version else "TOO FAR",
                    "" if str(c.get("version")) == a.k8s_version else
                    f"set aws.k8s_version: \"{c.get('version')}\" (kubectl's skew is checked against it)",
                    required=False),
    ]  # fmt: skip
    out += _kubernetes_rows(settings)
    enforced, line = network_policy(eks, settings)
    status = "ok" if enforced else ("unknown" if enforced is None else "FAILED")
    fix = line.split("Fix: ", 1)[1] if "Fix: " in line and not enforced else ""
    out.append(Requirement("NetworkPolicy enforcement", line.split(":")[0], "enforced (vpc-cni enableNetworkPolicy)",
                           status, fix, required=False))  # fmt: skip
    out.append(_agent_row(settings, eks))
    out.append(_storage_row(settings, sess, c))
    return out


def _kubernetes_rows(settings: Settings) -> list[Requirement]:
    a = settings.aws
    context, where = kube.cluster_context(settings)
    if context is None:
        fix = "`" + UPDATE_KUBECONFIG.format(name=a.cluster_name, region=a.region) + "`"
        return [Requirement("Kubernetes API", where, f"a kubeconfig context of {a.cluster_name}", "MISSING", fix)]
    try:
        with kube.using_client(settings) as api:
            dep = kuberay_operator.find_operator(api)
            found = plugins.find_daemonsets(api)
            nodes = kube.list_objects(api, "v1", "Node")
    except kube.K8sError as e:
        return [Requirement("Kubernetes API", f"{where}: {e}", "reachable", "FAILED", "see the message")]
    out = [Requirement("Kubernetes API", where, "reachable", "ok")]
    want = settings.versions.kuberay_version
    have = kuberay_operator.operator_version(dep) if dep else ""
    out.append(
        Requirement("KubeRay operator", f"{have} ({kuberay_operator.helm_release_name(dep) or 'no Helm release'})"
                    if dep else "none", f"v{want}", "ok" if have == f"v{want}" else ("MISSING" if not dep else
                    "TOO FAR"), "" if have == f"v{want}" else ("04 installs it (Helm chart kuberay-operator "
                    f"{want}, labelled as the tutorial's)" if not dep else f"upgrade it to {want}, or set "
                    f"versions.kuberay_version: {have.lstrip('v')}"), required=bool(dep))
    )  # fmt: skip
    for key, chart, version_field in CHARTS:
        dss = found.get(key) or []
        version = getattr(settings.versions, version_field)
        names = ", ".join(owners.describe(d) for d in dss)
        out.append(
            Requirement(
                owners.TITLES[key],
                names or "none",
                "one DaemonSet",
                "ok" if len(dss) == 1 else ("MISSING" if not dss else "FAILED"),
                ""
                if len(dss) == 1
                else (
                    f"`helm upgrade --install {chart['release']} {chart['chart']} --repo {chart['repo']} "
                    f"--version {version} --namespace kube-system`"
                    if not dss
                    else "remove all but one: two plugins for one resource share the kubelet's socket"
                ),
            )
        )
    out.append(_nodes_row(settings, nodes))  # fmt: skip
    return out


def _nodes_row(settings: Settings, nodes: list[dict]) -> Requirement:
    a = settings.aws
    typed = {id(n) for n in plugins.gpu_nodes(nodes, settings)}  # of the GPU type or labelled, with or without GPUs
    gpu = [node_row(n) for n in nodes if id(n) in typed or node_row(n)["gpus"] > 0]
    found = "; ".join(f"{r['name']} ({r['instance_type']}): {r['gpus']} GPU, {r['efa']} EFA, role={r['role'] or '-'}"
                      for r in gpu) or "no node with allocatable nvidia.com/gpu"  # fmt: skip
    needed = f"{a.gpu_node_count} node(s) with {a.gpus_per_node} GPU and >= 1 EFA, labelled role=gpu-worker"
    fit = [r for r in gpu if r["gpus"] == a.gpus_per_node and r["efa"] >= 1 and r["role"] == "gpu-worker"]
    if len(fit) >= a.gpu_node_count:
        return Requirement("GPU nodes (allocatable)", found, needed, "ok")
    unlabelled = [r["name"] for r in gpu if r["role"] != "gpu-worker"]
    fix = (f"`kubectl label node {' '.join(unlabelled)} role=gpu-worker` (the RayCluster's workers select it)"
           if unlabelled else "a node group of aws.gpu_node_type with EFA, or set aws.gpu_node_count / "
           "aws.gpus_per_node to what the cluster has")  # fmt: skip
    return Requirement("GPU nodes (allocatable)", found, needed, "SHORT", fix)


def _agent_row(settings: Settings, eks) -> Requirement:
    a = settings.aws
    needed = "installed (aws.pod_identity: pod-identity; auto falls back to IRSA)"
    try:
        found = aws_client.essential_call(
            eks, "describe_addon", absent=("ResourceNotFoundException",), clusterName=a.cluster_name,
            addonName=iam.POD_IDENTITY_ADDON,
        )  # fmt: skip
    except aws_client.AwsCallError as e:
        return Requirement("EKS Pod Identity agent", f"unreadable: {e}", needed, "unknown")
    fix = f"`eksctl create addon --cluster {a.cluster_name} --name {iam.POD_IDENTITY_ADDON}`"
    return Requirement("EKS Pod Identity agent", "installed" if found else "not installed", needed,
                       "ok" if found else "MISSING", "" if found else fix,
                       required=a.pod_identity == "pod-identity")  # fmt: skip


def _storage_row(settings: Settings, sess, c: dict) -> Requirement:
    from botocore.exceptions import BotoCoreError, ClientError

    ident = aws_client.identity(sess, settings.aws.region)
    try:
        st = storage_state.read_state(settings, sess, ident.account, c)
    except ConfigError as e:
        return Requirement("storage identity", str(e).split(". Fix: ")[0], "usable", "FAILED", str(e))
    except (ClientError, BotoCoreError, aws_client.AwsCallError) as e:
        return Requirement("storage identity", storage_state.denied("reading", e), "usable", "unknown")
    role = "absent (02 creates it)" if st.role is None else st.role_name
    assoc = "" if st.mode != "pod-identity" else (
        ", association absent (02 creates it)" if st.association is None else ", association present")  # fmt: skip
    found = f"{st.mode}: bucket {st.location.bucket} {st.bucket}, role {role}{assoc}"
    needed = "the tutorial's own role and association (or none yet)"
    if st.problems:
        return Requirement("storage identity", found, needed, "FAILED", " | ".join(st.problems))
    return Requirement("storage identity", found, needed, "ok")


__all__ = ["NETWORK_POLICY_KEY", "VPC_CNI", "network_policy", "rows"]
