"""03 · Devices: Ray Train can only place a worker where a device is *allocatable*.

Locally, the devices and collective backend each worker raylet offers; on aws the NVIDIA and EFA device plugins,
then a wait until every GPU node advertises its GPUs and EFA interfaces (a healthy Helm release is not evidence).
"""

from __future__ import annotations

from ..core.settings import Settings
from ..targets import StepResult, for_settings


def step(settings: Settings, *, assume_yes: bool = False) -> StepResult:
    """Notebook 03's entry point."""
    return for_settings(settings).devices(settings, assume_yes=assume_yes)
