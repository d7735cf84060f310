"""The aws target's billable entry points, each behind the preflight (:func:`.preflight.require`).

The package exports these as ``cluster`` and ``capacity``, so every caller (the notebooks' steps, the CLI, a
script) meets the preflight before eksctl creates the cluster or a probe reserves capacity; reading and deleting
(``plan``, ``status``, ``down``, 01 without ``probe``) never wait on it: a learner can always see and remove what
exists. The preflight runs again each time (a few seconds: four ``--version`` calls and four read-only AWS
calls), so a tool removed or credentials expired since 01 are caught where they would cost money.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.settings import Settings
from . import eks
from .placement import blocks as capacity_blocks
from .preflight import require


def cluster(settings: Settings, action: str | None = "up", *, assume_yes: bool = False) -> eks.AwsClusterResult:
    """:func:`.eks.cluster`; ``up`` only after the preflight passed."""
    if (action or ("up" if assume_yes else "plan")) == "up":
        require(settings, "step 02 `cluster up` (eksctl creates the billable cluster and node groups)")
    return eks.cluster(settings, action, assume_yes=assume_yes)


def capacity(
    settings: Settings,
    *,
    probe: bool = False,
    assume_yes: bool = False,
    regions: Sequence[str] | str | None = None,
    prices: Any = None,
    save: bool = True,
) -> capacity_blocks.CapacityWithBlocks:
    """:func:`.capacity_blocks.capacity` (01's report with the Capacity Block offerings); with ``probe`` (a
    billable reservation) only after the preflight passed."""
    if probe:
        require(settings, "the capacity probe (it creates, then cancels, a billable capacity reservation)")
    return capacity_blocks.capacity(
        settings, probe=probe, assume_yes=assume_yes, regions=regions, prices=prices, save=save
    )


__all__ = ["capacity", "cluster"]
