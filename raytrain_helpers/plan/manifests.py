"""Every document the aws path creates: the Kubernetes manifests, one object per file, in the order they are
applied; the values of the Helm releases (device plugins, KubeRay operator); the eksctl configs; the storage role's
IAM policies and its Pod Identity association.

``raytrain-tutorial render --out DIR`` writes them: the Kubernetes objects at the top of DIR for
``kubectl apply --server-side -f DIR`` (which does not descend into folders), the others under ``helm/``,
``eksctl/``, ``iam/`` and ``eks/`` (see :func:`aws_documents`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..core.settings import Settings
from . import eksctl, iam, metrics_stack, plugins, raycluster
from .iam import render_service_account
from .raycluster import render_namespace, render_network_policies, render_raycluster, render_rayjob
from .render import to_yaml

#: Objects written under this sub-folder are alternatives, not part of `kubectl apply -f DIR`.
ALTERNATIVES = "alternatives"
HEADER = "# Rendered by `raytrain-tutorial render` from env.yaml; edit env.yaml, not this file.\n"


def filename(index: int, obj: dict[str, Any]) -> str:
    """``NN-kind-name.yaml``: the apply order is the file order."""
    return f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def render_all(settings: Settings, *, include_alternatives: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """Every object the aws target applies, in apply order, as (filename, object).

    Order: the namespace, the pods' ServiceAccount (Pod Identity; under IRSA step 04 adds the role annotation), the
    RayCluster (notebook 04); the device plugins (03) and the KubeRay operator (04) before them are Helm releases
    (:func:`helm_releases`). The RayJob (the declarative alternative to notebook 05) comes last under
    ``alternatives/``: applying it next to the RayCluster would ask for every GPU node twice.
    """
    objs = [render_namespace(settings), *render_network_policies(settings), render_service_account(settings)]
    objs += [render_raycluster(settings)]
    out = [(filename(i, obj), obj) for i, obj in enumerate(objs, start=1)]
    if include_alternatives:
        job = render_rayjob(settings)
        out.append((f"{ALTERNATIVES}/{filename(len(out) + 1, job)}", job))
    return out


#: What a document rendered before anything exists shows where step 02 fills in a value read from AWS.
PLACEHOLDERS = dict(
    account="ACCOUNT",
    gpu_az="GPU_AZ",
    second_az="SECOND_AZ",
    subnet="SUBNET_ID_IN_GPU_AZ",
    oidc_issuer="oidc.eks.REGION.amazonaws.com/id/CLUSTER_ID",
)


def _placeholder_note(used: list[str]) -> str:
    return (
        f"# Rendered before the cluster exists: {', '.join(used)} are placeholders that step 02 fills in from "
        f"EC2\n# (`raytrain-tutorial cluster plan` shows the real values).\n"
        if used
        else ""
    )


def eksctl_documents(settings: Settings) -> list[tuple[str, str]]:
    """``eksctl/cluster.yaml`` and ``eksctl/gpu-nodegroup.yaml`` as step 02 renders them; the AZs (unless
    ``aws.gpu_az`` names one) and the subnet ids are placeholders, since they come from EC2 and the new VPC."""
    gpu_az = settings.aws.gpu_az or PLACEHOLDERS["gpu_az"]
    used = [] if settings.aws.gpu_az else [PLACEHOLDERS["gpu_az"]]
    cluster = eksctl.render_cluster_config(settings, azs=[gpu_az, PLACEHOLDERS["second_az"]], gpu_az=gpu_az)
    gpu = eksctl.render_gpu_nodegroup_config(settings, gpu_az=gpu_az, subnet_ids=[PLACEHOLDERS["subnet"]])
    return [
        ("eksctl/cluster.yaml", _placeholder_note([*used, PLACEHOLDERS["second_az"]]) + cluster),
        ("eksctl/gpu-nodegroup.yaml", _placeholder_note([*used, PLACEHOLDERS["subnet"]]) + gpu),
    ]


def aws_storage_settings(settings: Settings) -> Settings:
    """The settings as the aws path reads their storage: a local target's folder in ``train.storage_path`` is
    left out (aws then derives its bucket), an ``s3://`` path or an empty one kept."""
    path = settings.train.storage_path
    if path and not path.startswith("s3://"):
        return settings.model_copy(update={"train": settings.train.model_copy(update={"storage_path": ""})})
    return settings


def iam_documents(settings: Settings, account: str = PLACEHOLDERS["account"]) -> list[tuple[str, str]]:
    """The storage role's trust and permission policies (JSON, as ``aws iam create-role`` / ``put-role-policy``
    take them), the bucket's policy (``aws s3api put-bucket-policy``: TLS only; on a bucket the tutorial creates)
    and, under Pod Identity, the ``aws eks create-pod-identity-association --cli-input-json`` body."""
    settings = aws_storage_settings(settings)
    loc = iam.storage_location(settings, account)
    mode = "irsa" if settings.aws.pod_identity == "irsa" else "pod-identity"
    trust = iam.trust_policy(settings, mode, account, PLACEHOLDERS["oidc_issuer"])
    docs = [
        ("iam/storage-role-trust-policy.json", json.dumps(trust, indent=2) + "\n"),
        ("iam/storage-role-permission-policy.json", json.dumps(iam.permission_policy(settings, loc), indent=2) + "\n"),
        ("iam/bucket-policy.json", json.dumps(iam.bucket_policy(settings, loc.bucket), indent=2) + "\n"),
    ]
    if mode == "pod-identity":
        k = settings.kubernetes
        body = dict(
            clusterName=settings.aws.cluster_name,
            namespace=k.namespace,
            serviceAccount=k.service_account,
            roleArn=f"arn:aws:iam::{account}:role/{iam.role_name(settings)}",
        )
        docs.append(("eks/pod-identity-association.json", json.dumps(body, indent=2) + "\n"))
    return docs


def helm_releases(settings: Settings) -> list[dict[str, Any]]:
    """The Helm releases of the aws path, in install order: the NVIDIA and EFA device plugins (03), the KubeRay
    operator (04), each with its chart, repository, pinned version, namespace and values."""
    out = []
    for key, chart, version_field in plugins.CHARTS:
        out.append(
            dict(
                chart,
                version=getattr(settings.versions, version_field),
                namespace=plugins.NAMESPACE,
                values=plugins.helm_values(settings)[key],
                create_namespace=False,
            )
        )
    out.append(
        dict(
            release=raycluster.OPERATOR_RELEASE,
            chart=raycluster.OPERATOR_CHART,
            repo=raycluster.KUBERAY_HELM_REPO,
            version=settings.versions.kuberay_version,
            namespace=raycluster.OPERATOR_NAMESPACE,
            values=raycluster.operator_helm_values(settings),
            create_namespace=True,
        )
    )
    return out


def helm_documents(settings: Settings) -> list[tuple[str, str]]:
    """``helm/<release>.values.yaml``: each release's values, headed by the command that installs it."""
    docs = []
    for r in helm_releases(settings):
        docs.append(
            (f"helm/{r['release']}.values.yaml", _install_command(r) + yaml.safe_dump(r["values"], sort_keys=False))
        )
    return docs


def _install_command(r: dict[str, Any]) -> str:
    return (
        f"# helm upgrade --install {r['release']} {r['chart']} --repo {r['repo']} --version {r['version']} "
        f"--namespace {r['namespace']}{' --create-namespace' if r['create_namespace'] else ''} -f THIS_FILE\n"
    )


def metrics_documents(settings: Settings) -> list[tuple[str, str]]:
    """``metrics/``: the opt-in metrics stack (:mod:`.metrics_stack`), only with ``aws.metrics_stack: true``: each
    release's values headed by its install command, then the objects to apply, and how to open what they run."""
    if not settings.aws.metrics_stack:
        return []
    docs = [
        (f"metrics/helm/{r['release']}.values.yaml", _install_command(r) + yaml.safe_dump(r["values"], sort_keys=False))
        for r in metrics_stack.releases(settings)
    ]
    docs += [
        (f"metrics/{filename(i, o)}", HEADER + to_yaml(o))
        for i, o in enumerate(metrics_stack.objects(settings), start=1)
    ]
    steps = "\n".join(f"# {what}:\n{how}" for what, how in metrics_stack.OPEN)
    order = "# 1. the two Helm releases (metrics/helm/, the command atop each file), 2. kubectl apply -f metrics/\n"
    docs.append(("metrics/OPEN.sh", HEADER + order + steps + "\n"))
    return docs


def aws_documents(settings: Settings, account: str = PLACEHOLDERS["account"]) -> list[tuple[str, str]]:
    """Every document of the aws path besides the Kubernetes objects, as (relative path, text); ``account``: the
    account id (a placeholder when rendered without credentials)."""
    return (
        helm_documents(settings)
        + eksctl_documents(settings)
        + iam_documents(settings, account)
        + metrics_documents(settings)
    )


def write_all(
    settings: Settings,
    out_dir: str | Path,
    *,
    include_alternatives: bool = True,
    account: str = PLACEHOLDERS["account"],
) -> list[Path]:
    """Write :func:`render_all` (one object per file) and :func:`aws_documents` to ``out_dir``; stale files of
    ours are replaced. Everything is rendered before the first file is written."""
    out = Path(out_dir)
    rendered = [(n, HEADER + to_yaml(o)) for n, o in render_all(settings, include_alternatives=include_alternatives)]
    rendered += aws_documents(settings, account)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in rendered:
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths


__all__ = [
    "ALTERNATIVES",
    "HEADER",
    "PLACEHOLDERS",
    "aws_documents",
    "aws_storage_settings",
    "eksctl_documents",
    "filename",
    "helm_documents",
    "helm_releases",
    "iam_documents",
    "metrics_documents",
    "render_all",
    "write_all",
]
