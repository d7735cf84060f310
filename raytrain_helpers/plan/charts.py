"""The three Helm charts the aws path installs, each with its repository, the settings that pin its version and its
archive's sha256, and where the pinned digest was read (docs/pins.md has the same, with dates).

Before anything bills, the preflight asks helm to resolve each chart at its pinned version (``helm show chart``);
before installing one, step 03/04 downloads the archive (``helm pull``), compares its sha256 with the pinned digest
(or, where none is pinned, with the ``digest`` of its entry in the repository's index, which helm's index holds as
the archive's sha256: helm/helm v3.21.4 ``pkg/repo/chartrepo.go`` ``generateIndex``, ``pkg/provenance/sign.go``
``DigestFile``) and installs that archive only (``clients.helm.upgrade_install``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.settings import Settings
from .plugins import EFA_CHART, NVIDIA_CHART
from .raycluster import KUBERAY_HELM_REPO, OPERATOR_CHART


@dataclass(frozen=True)
class Chart:
    chart: str
    repo: str
    version_field: str  # of settings.versions
    digest_field: str  # of settings.versions
    digest_source: str  # where the default digest was read ('' when none could be)

    def version(self, settings: Settings) -> str:
        return getattr(settings.versions, self.version_field)

    def digest(self, settings: Settings) -> str:
        """The pinned sha256 ('' = take the repository index's at install time)."""
        return getattr(settings.versions, self.digest_field)


CHARTS = (
    Chart(
        OPERATOR_CHART,
        KUBERAY_HELM_REPO,
        "kuberay_version",
        "kuberay_chart_digest",
        "",  # the newest readable index of ray-project/kuberay-helm (gh-pages 4f704bab, 2025-07-16) ends at 1.4.2
    ),
    Chart(
        NVIDIA_CHART["chart"],
        NVIDIA_CHART["repo"],
        "nvidia_device_plugin_version",
        "nvidia_device_plugin_chart_digest",
        "https://nvidia.github.io/k8s-device-plugin/index.yaml (NVIDIA/k8s-device-plugin gh-pages bf584288, "
        "generated 2026-08-20): nvidia-device-plugin 0.20.0 digest; the sha256 of "
        "stable/nvidia-device-plugin-0.20.0.tgz on that branch is the same",
    ),
    Chart(
        EFA_CHART["chart"],
        EFA_CHART["repo"],
        "efa_device_plugin_version",
        "efa_device_plugin_chart_digest",
        "https://aws.github.io/eks-charts/index.yaml (aws/eks-charts gh-pages c7f9ea56, 2026-08-03): "
        "aws-efa-k8s-device-plugin v0.5.30 digest; the sha256 of the .tgz on that branch is the same",
    ),
)
BY_NAME = {c.chart: c for c in CHARTS}


def digest_fix(chart: Chart) -> str:
    """How to set the digest when the version moved or the archive changed."""
    return (
        f"if you moved versions.{chart.version_field}, set versions.{chart.digest_field} to the `digest` of that "
        f"version's entry in {chart.repo.rstrip('/')}/index.yaml (or to '' to take it from that index when the "
        f"chart is installed); otherwise the archive is not the one published when it was pinned: do not install it"
    )


__all__ = ["BY_NAME", "CHARTS", "Chart", "digest_fix"]
