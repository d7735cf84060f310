"""Helm: ``upgrade --install`` of a pinned chart version and ``uninstall``, always against the kubeconfig context and
file the Kubernetes client of :mod:`.kubernetes` uses. The aws path installs its device plugins and the KubeRay
operator only this way, so helm must be on PATH there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from .kubernetes import K8sError, context_of, kubeconfig_of


def executable() -> str | None:
    """The ``helm`` on PATH, or None."""
    return shutil.which("helm")


def kube_args(client) -> list[str]:
    """``--kube-context`` / ``--kubeconfig`` of the Kubernetes client, so helm talks to the same cluster."""
    args = []
    context = context_of(client)
    if context:
        args += ["--kube-context", context]
    kubeconfig = kubeconfig_of(client)
    if kubeconfig:
        args += ["--kubeconfig", kubeconfig]
    return args


def run_helm(args: list[str], *, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Run ``helm ARGS``; a failure raises :class:`K8sError` with helm's own message."""
    exe = executable()
    if exe is None:
        raise K8sError(
            "helm is not on PATH: the device plugins and the KubeRay operator are installed with it. Fix: install "
            "helm 3+ (https://helm.sh/docs/intro/install/), then run the step again; `raytrain-tutorial check "
            "--target aws` lists every prerequisite"
        )
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise K8sError(
            f"helm {' '.join(args[:3])} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}"
        )
    return proc


def upgrade_install(
    client,
    *,
    release: str,
    chart: str,
    repo: str,
    version: str,
    namespace: str,
    values: dict[str, Any],
    create_namespace: bool = False,
    labels: dict[str, str] | None = None,
    timeout_s: float = 600,
) -> subprocess.CompletedProcess:
    """``helm upgrade --install`` of one pinned chart version with these values (idempotent). ``labels``: the
    release's own labels (``--labels``, helm 3.13 or later: helm/helm v3.13.0 cmd/helm/upgrade.go; kept on the
    release's storage object and matched by ``helm list --selector``)."""
    with tempfile.TemporaryDirectory() as folder:
        values_file = Path(folder) / "values.yaml"
        values_file.write_text(yaml.safe_dump(values, sort_keys=False))
        args = ["upgrade", "--install", release, chart, "--repo", repo, "--version", version, "--namespace", namespace]
        if create_namespace:
            args.append("--create-namespace")
        if labels:
            args += ["--labels", ",".join(f"{k}={v}" for k, v in labels.items())]
        return run_helm([*args, "-f", str(values_file), *kube_args(client)], timeout_s=timeout_s)


def releases(client, namespace: str, *, selector: str = "") -> list[str]:
    """The names of the releases in ``namespace`` (every status), only those whose release labels match
    ``selector`` when given (``helm list --all --output json --selector``, helm/helm v3.16.3 cmd/helm/list.go)."""
    args = ["list", "--all", "--namespace", namespace, "--output", "json"]
    if selector:
        args += ["--selector", selector]
    proc = run_helm([*args, *kube_args(client)], timeout_s=120)
    try:
        found = json.loads(proc.stdout or "[]") or []
    except ValueError as e:
        raise K8sError(f"helm list printed no JSON: {e}: {proc.stdout[:200]!r}") from None
    return [str(r.get("name")) for r in found if isinstance(r, dict)]


def uninstall(client, release: str, namespace: str, *, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """``helm uninstall RELEASE`` in the namespace."""
    return run_helm(["uninstall", release, "--namespace", namespace, *kube_args(client)], timeout_s=timeout_s)


__all__ = ["executable", "kube_args", "releases", "run_helm", "uninstall", "upgrade_install"]
