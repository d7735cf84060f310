"""01 · Capacity: is there room for the job, and does the model fit?

First the preflight (:func:`preflight`): what the target needs on this machine, one table; the notebook stops
there when a required row failed. Then the target answers the first question (this machine's CPUs, memory and
GPUs; or AWS offerings, quotas, Spot scores and a placement); every target ends with the FSDP memory plan.
"""

from __future__ import annotations

from typing import Any

from ..core.settings import Settings
from ..plan import perf
from ..plan.memory import MemoryPlan, article_figure_check
from ..plan.memory import article_plan as article_memory_plan
from ..targets import StepResult, for_settings
from ..targets.base import PreflightResult


class PreflightFailed(RuntimeError):
    """The preflight found a required row unmet: nothing after it runs (the table above says what to fix)."""

    def _render_traceback_(self) -> list[str]:
        """IPython (a notebook) shows this one line instead of a traceback."""
        return [f"{type(self).__name__}: {self}"]


def preflight(settings: Settings, *, quota: bool = True) -> PreflightResult:
    """Notebook 01's first step (``raytrain-tutorial check``): the target's preflight table, printed;
    :class:`PreflightFailed` when a required row is not met, so the notebook stops before anything else runs."""
    result = for_settings(settings).preflight(settings, quota=quota)
    result.show()
    if not result.ok:
        raise PreflightFailed(f"{result.summary()}. Fix: the fixes above, then run this cell again")
    return result


def check(settings: Settings, *, probe: bool = False, assume_yes: bool = False, regions: Any = None) -> StepResult:
    """Notebook 01's entry point (``probe``: create-and-cancel a capacity reservation per AZ, aws only)."""
    return for_settings(settings).capacity(settings, probe=probe, assume_yes=assume_yes, regions=regions)


def article_plan() -> MemoryPlan:
    """The source article's example: Qwen2.5-1.5B sharded over 8 L4 GPUs (2 x g6.12xlarge)."""
    return article_memory_plan()


def predict(settings: Settings, cap: StepResult | None = None) -> dict[str, perf.Prediction]:
    """Throughput, time and cost predicted before anything runs, one row per transport 07 compares: for this
    machine's GPUs (the local capacity result lists them) or for the aws shape in the settings."""
    cap = cap if cap is not None else check(settings)
    local_gpus = getattr(cap, "gpus", None)  # only the local target's result lists this machine's GPUs
    return perf.predictions(settings, local_gpus=local_gpus)


def show_prediction(settings: Settings, cap: StepResult | None = None) -> None:
    """01's prediction as a plain-text table (one row per transport)."""
    perf.show_predictions(predict(settings, cap))


__all__ = [
    "PreflightFailed",
    "preflight",
    "check",
    "predict",
    "show_prediction",
    "article_plan",
    "article_figure_check",
]
