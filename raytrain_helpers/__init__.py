"""raytrain-tutorial helpers: everything the notebooks call.

The notebooks stay thin; the logic lives here, where it is tested.
"""

from . import capacity, cluster, config, jobs, report  # noqa: F401
from .config import ConfigError, Settings, load, settings_from  # noqa: F401
from .report import describe, table  # noqa: F401

__version__ = "0.1.0"


def __getattr__(name: str):
    """Modules are imported on first use: ``rt.nccl``, ``rt.kuberay``, ``rt.plugins``..."""
    import importlib
    if name in ("nccl", "kuberay", "plugins", "k8s", "capacity_aws", "runner", "train", "render", "targets"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(name)
