"""raytrain-tutorial helpers: everything the notebooks call.

The notebooks stay thin and read ``rt.steps.<notebook>.<function>(cfg)``; the logic lives in the package's
layers (core, plan, nccl, clients, targets, present, steps, cli), where it is tested. Subpackages are imported on first
use, so the training job (``raytrain_helpers.worker``) loads nothing of the notebook side.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBPACKAGES = ("core", "plan", "nccl", "clients", "targets", "present", "steps", "worker", "cli")
_NAMES = {
    "ConfigError": "core.validation",
    "Settings": "core.settings",
    "load": "core.loading",
    "settings_from": "core.parameters",
    "table": "core.tables",
    "describe": "steps.overview",
}


def __getattr__(name: str):
    """``rt.steps``, ``rt.nccl``...; ``rt.settings_from``, ``rt.describe``, ``rt.table``."""
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConfigError", "Settings", "describe", "load", "settings_from", "table", *_SUBPACKAGES]
