"""The aws target's answers to the Target interface's per-target questions that need no module of their own: the
CLI's actions on the device plugins (03) and on KubeRay (04), the worker node count, the memory plan, the steps'
equivalent commands (:mod:`.commands`), and what still bills (:mod:`.eks.billing`)."""

from __future__ import annotations

from typing import Any

from ...core.config import Settings
from ...plan.memory import MemoryPlan, aws_plan
from ..base import OPERATOR_ACTION, PART_ACTIONS, BillingResult, StepResult, check_action
from . import commands
from .eks import billing as eks_billing
from .kuberay import raycluster as kuberay
from .plugins import install as plugins
from .workshop import attendee as shared

#: The notebooks show this target's own commands: it stands in for no other.
STANDS_IN_FOR = None
#: ``cluster down --nodegroup-only``: eksctl deletes the GPU node group alone (:func:`.eks.teardown`).
NODEGROUP_ONLY_DOWN = True
#: The workers run in the cluster's image, not in this machine's environment.
WORKERS_USE_THIS_ENVIRONMENT = False


def _timeout(timeout_s: float | None) -> dict[str, Any]:
    return {} if timeout_s is None else {"timeout_s": timeout_s}


def plugins_action(
    settings: Settings, action: str = "up", *, assume_yes: bool = False, timeout_s: float | None = None
) -> StepResult:
    """``up``: :func:`.plugins.devices` (03's step); ``status``: read only; ``down``: the tutorial's plugins."""
    check_action(action, PART_ACTIONS)
    if action == "up":
        return shared.devices(settings, assume_yes=assume_yes, **_timeout(timeout_s))
    if action == "status":
        return plugins.status(settings)
    return shared.plugins_teardown(settings, assume_yes=assume_yes, **_timeout(timeout_s))


def kuberay_action(
    settings: Settings, action: str = "up", *, assume_yes: bool = False, timeout_s: float | None = None
) -> StepResult:
    """``up``: :func:`.kuberay.access.raycluster` (04's step: the RayCluster Ready, its Jobs API answering, the storage
    reachable from its pods); ``status``: read only; ``down``: the RayCluster and the operator; ``operator``: the
    operator alone. A workshop attendee (``aws.shared_cluster``) goes through :mod:`.workshop.attendee`, kept to their
    namespace."""
    check_action(action, (*PART_ACTIONS, OPERATOR_ACTION))
    if action == "up":
        return shared.raycluster(settings, assume_yes=assume_yes, **_timeout(timeout_s))
    if action == "status":
        return kuberay.status(settings)
    if action == OPERATOR_ACTION:
        return shared.operator(settings, **_timeout(timeout_s))
    return shared.kuberay_teardown(settings, assume_yes=assume_yes, **_timeout(timeout_s))


def worker_node_count(settings: Settings) -> int:
    """The GPU node group's size."""
    return settings.aws.gpu_node_count


def cluster_missing(settings: Settings) -> str | None:
    """Not checked before a run: it would take AWS and Kubernetes calls; 04 and 05 name a missing cluster."""
    return None


def memory_plan(settings: Settings) -> MemoryPlan:
    """The plan for the GPU node type's GPUs (from the offline table)."""
    return aws_plan(settings)


def equivalent_commands(settings: Settings, step: str) -> list[tuple[str, str]]:
    """The aws commands of ``step`` (:mod:`.commands`)."""
    return commands.equivalent_commands(settings, step)


__all__ = [
    "NODEGROUP_ONLY_DOWN",
    "STANDS_IN_FOR",
    "WORKERS_USE_THIS_ENVIRONMENT",
    "cluster_missing",
    "equivalent_commands",
    "kuberay_action",
    "memory_plan",
    "plugins_action",
    "worker_node_count",
]


def billing(settings: Settings) -> BillingResult:
    """What of the tutorial bills now in the account (:func:`.eks.billing.billing`)."""
    return eks_billing.billing(settings)


def after_failure(settings: Settings) -> BillingResult:
    """After a failed step: what bills; with ``aws.teardown_on_failure``, notebook 08's teardown first (an attendee's
    own objects only, on a shared cluster)."""
    return eks_billing.after_failure(settings, shared.teardown)
