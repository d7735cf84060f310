"""Helm: ``upgrade --install`` of a pinned chart version (from its archive, checked against its sha256 first) and
``uninstall``, always against the kubeconfig context and
file the Kubernetes client of :mod:`.kubernetes` uses. The aws path installs its device plugins and the KubeRay
operator only this way, so helm must be on PATH there.
"""

from __future__ import annotations

import hashlib
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
            "helm 3.x to 4.2.4 (https://helm.sh/docs/intro/install/), then run the step again; "
            "`raytrain-tutorial check --target aws` lists every prerequisite"
        )
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise K8sError(
            f"helm {' '.join(args[:3])} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}"
        )
    return proc


class ChartDigestError(K8sError):
    """A chart archive whose sha256 is not the one expected: it was not installed."""


def show_chart(chart: str, repo: str, version: str, *, timeout_s: float = 120) -> dict[str, Any]:
    """``helm show chart CHART --repo REPO --version V``: the chart's ``Chart.yaml`` as helm resolves it from the
    repository's index (helm/helm v3.21.4 ``cmd/helm/show.go``); K8sError with helm's message when it cannot."""
    out = run_helm(["show", "chart", chart, "--repo", repo, "--version", version], timeout_s=timeout_s).stdout
    doc = yaml.safe_load(out or "")
    return doc if isinstance(doc, dict) else {}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def index_digest(chart: str, repo: str, version: str, folder: Path, *, timeout_s: float = 120) -> str:
    """The ``digest`` of ``chart`` ``version`` in the repository's index, as helm downloads it (``helm repo add``
    into a repository config and cache of their own, so the learner's are untouched; the index lands in
    ``<cache>/<name>-index.yaml``: helm/helm v3.21.4 ``pkg/helmpath/home.go`` ``CacheIndexFile``)."""
    name, cache = "raytrain-verify", folder / "cache"
    run_helm(
        ["repo", "add", name, repo, "--repository-config", str(folder / "repositories.yaml"),
         "--repository-cache", str(cache)],
        timeout_s=timeout_s,
    )  # fmt: skip
    index = yaml.safe_load((cache / f"{name}-index.yaml").read_text()) or {}
    for entry in (index.get("entries") or {}).get(chart) or []:
        if str(entry.get("version")) == version and entry.get("digest"):
            return str(entry["digest"]).lower()
    raise K8sError(f"{repo} index has no digest for {chart} {version}: the chart was not installed")


def verified_archive(chart: str, repo: str, version: str, digest: str, folder: Path, *, fix: str = "") -> Path:
    """``helm pull`` of the chart version into ``folder``, its sha256 compared with ``digest`` ('' = the
    repository index's, :func:`index_digest`); :class:`ChartDigestError` when they differ. Returns the archive."""
    expected = digest or index_digest(chart, repo, version, folder / "index")
    dest = folder / "pulled"
    dest.mkdir(parents=True, exist_ok=True)
    run_helm(["pull", chart, "--repo", repo, "--version", version, "--destination", str(dest)])
    archives = sorted(dest.glob("*.tgz"))  # helm names it after the URL in the index (chart_downloader.go)
    if len(archives) != 1:
        raise K8sError(f"helm pull {chart} {version} left {len(archives)} archives in {dest}, expected one")
    actual = sha256_of(archives[0])
    if actual != expected:
        raise ChartDigestError(
            f"chart {chart} {version} from {repo}: the archive's sha256 is {actual}, expected {expected} "
            f"({'pinned' if digest else 'the index'}); it was not installed. Fix: {fix or 'check the repository'}"
        )
    return archives[0]


def upgrade_install(
    client,
    *,
    release: str,
    chart: str,
    repo: str,
    version: str,
    digest: str,
    namespace: str,
    values: dict[str, Any],
    create_namespace: bool = False,
    labels: dict[str, str] | None = None,
    timeout_s: float = 600,
    digest_fix: str = "",
) -> subprocess.CompletedProcess:
    """``helm upgrade --install`` of one pinned chart version with these values (idempotent), from the archive
    :func:`verified_archive` checked against ``digest`` (nothing is installed when it differs). ``labels``: the
    release's own labels (``--labels``, helm 3.13 or later: helm/helm v3.13.0 cmd/helm/upgrade.go; kept on the
    release's storage object and matched by ``helm list --selector``)."""
    with tempfile.TemporaryDirectory() as folder:
        archive = verified_archive(chart, repo, version, digest, Path(folder), fix=digest_fix)
        values_file = Path(folder) / "values.yaml"
        values_file.write_text(yaml.safe_dump(values, sort_keys=False))
        args = ["upgrade", "--install", release, str(archive), "--namespace", namespace]
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


__all__ = [
    "ChartDigestError",
    "executable",
    "index_digest",
    "kube_args",
    "releases",
    "run_helm",
    "sha256_of",
    "show_chart",
    "uninstall",
    "upgrade_install",
    "verified_archive",
]
