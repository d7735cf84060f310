"""01 · Capacity: is there room for the job, and does the model fit?

The target answers the first question (this machine's CPUs, memory and GPUs; or AWS offerings, quotas, Spot
scores and a placement); every target ends with the FSDP memory plan.
"""

from __future__ import annotations

from typing import Any

from ..core.config import Settings
from ..plan import perf
from ..plan.memory import MemoryPlan, article_figure_check
from ..plan.memory import article_plan as article_memory_plan
from ..targets import StepResult, for_settings


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


__all__ = ["check", "predict", "show_prediction", "article_plan", "article_figure_check"]
