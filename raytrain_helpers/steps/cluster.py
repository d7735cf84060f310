"""02 · The cluster: start (or reuse) the local raylets, or create EKS with eksctl.

``action`` is ``up``, ``status``, ``plan`` or ``down``; ``plan`` creates nothing, and every action is safe to
repeat. Left as None, the target picks: ``up`` locally; on aws ``up`` with ``assume_yes`` and ``plan`` without.
"""

from __future__ import annotations

from ..core.constants import STEP_ACTIONS
from ..core.settings import Settings
from ..targets import StepResult, for_settings
from ..targets.base import check_action


def step(settings: Settings, action: str | None = None, *, assume_yes: bool = False) -> StepResult:
    """Notebook 02's entry point."""
    if action is not None:
        check_action(action, STEP_ACTIONS)
    return for_settings(settings).cluster(settings, action, assume_yes=assume_yes)


def exposure(result: StepResult) -> None:
    """What the running cluster exposes, where its target can tell (the local raylets' listening sockets)."""
    show = getattr(result, "show_exposure", None)
    if show is None:
        print("no listing of listening sockets for this cluster: its Ray head's ports are described in 04")
    else:
        show()
