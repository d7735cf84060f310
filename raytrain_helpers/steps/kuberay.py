"""04 · KubeRay and the RayCluster: the whole cluster layout is one manifest rendered from env.yaml.

On aws the operator is installed at KUBERAY_VERSION and the RayCluster applied and waited for; locally the
manifest is rendered and each part mapped to its stand-in in the cluster of 02.
"""

from __future__ import annotations

from ..core.settings import Settings
from ..targets import StepResult, for_settings


def step(settings: Settings, *, assume_yes: bool = False) -> StepResult:
    """Notebook 04's entry point."""
    return for_settings(settings).raycluster(settings, assume_yes=assume_yes)
