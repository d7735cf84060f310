"""Where the tutorial runs: ``local`` (a real Ray cluster on this machine) or ``aws`` (EKS + KubeRay).

Each target exports the names of :mod:`.base` (the Target interface). :func:`for_settings` is the one place in
the package that reads ``settings.target``.
"""

from __future__ import annotations

import importlib

from ..core.settings import Settings
from ..core.validation import ConfigError
from .base import INTERFACE, DashboardAccess, JobDefaults, StepResult, Target

#: The targets there are, by the name ``settings.target`` takes.
NAMES = ("local", "aws")


def for_settings(settings: Settings) -> Target:
    """The target module the settings ask for (imported on first use: the aws target needs boto3)."""
    name = settings.target
    if name not in NAMES:
        raise ConfigError(f"target = {name!r} is not a target. Fix: target: local or target: aws")
    return importlib.import_module(f"{__name__}.{name}")


def show_aws_equivalents(settings: Settings, *, docs: str, account: str, teardown: bool = False) -> None:
    """Print the commands a person would type to create (``teardown``: remove) what the aws path creates, with the
    documents rendered into ``docs``; on any target (on ``local`` they show what the aws path would do)."""
    equivalents = importlib.import_module(f"{__name__}.aws.equivalents")  # imported on first use, as for_settings
    equivalents.show(settings, docs=docs, account=account, teardown=teardown)


__all__ = [
    "INTERFACE",
    "NAMES",
    "DashboardAccess",
    "JobDefaults",
    "StepResult",
    "Target",
    "for_settings",
    "show_aws_equivalents",
]
