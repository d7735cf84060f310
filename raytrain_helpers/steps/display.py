"""What the notebooks show beside each step, under the name they call it by: ``rt.steps.display.<name>``.

The presentation kit itself is the package :mod:`raytrain_helpers.present` (tables, HTML, widgets, the live view,
manifests and commands), a layer below the steps; this module gives its names to the notebooks, and adds the one
view that reads a step's own logic: :func:`efficiency` (the kernels the job ran with, from :mod:`.verify`).
"""

from __future__ import annotations

from typing import Any

from ..present import (
    CRITERIA_WIDTHS,
    DEFAULT_OVERRIDE_FILE,
    FORM_FIELDS,
    FRONTEND_METADATA_KEYS,
    LIST_LIMIT,
    MANIFEST_NAMES,
    MAX_WIDTH,
    STATUS_COLOURS,
    STEP_COMMANDS,
    LiveView,
    QuietView,
    SettingsForm,
    Shown,
    abridge,
    code_lines,
    cost_note,
    criteria_rows,
    criteria_view,
    equivalent_commands,
    fit,
    interactive_frontend,
    key_lines,
    live_view,
    metrics_line,
    placeholder_azs,
    read_overrides,
    resolve,
    save_overrides,
    settings_form,
    settings_table,
    show_manifest,
    show_nccl_lines,
    show_source,
    target_name,
    validate_overrides,
    wrapped_table,
)
from .verify import ran_kernels

__all__ = [
    "CRITERIA_WIDTHS",
    "DEFAULT_OVERRIDE_FILE",
    "FORM_FIELDS",
    "FRONTEND_METADATA_KEYS",
    "LIST_LIMIT",
    "MANIFEST_NAMES",
    "MAX_WIDTH",
    "STATUS_COLOURS",
    "STEP_COMMANDS",
    "LiveView",
    "QuietView",
    "SettingsForm",
    "Shown",
    "abridge",
    "code_lines",
    "cost_note",
    "criteria_rows",
    "criteria_view",
    "efficiency",
    "equivalent_commands",
    "fit",
    "interactive_frontend",
    "key_lines",
    "live_view",
    "metrics_line",
    "placeholder_azs",
    "read_overrides",
    "resolve",
    "save_overrides",
    "settings_form",
    "settings_table",
    "show_manifest",
    "show_nccl_lines",
    "show_source",
    "target_name",
    "validate_overrides",
    "wrapped_table",
]


def efficiency(run: Any) -> Shown:
    """05: the batch and kernels the job ran with, and each rank's model FLOPs utilisation (GPU workers)."""
    cfg = getattr(run, "job_config", None)
    mfu = [r.get("mfu") for r in getattr(run, "ranks", None) or []]
    per_rank = ", ".join(f"{m:.0%}" for m in mfu) if mfu and all(m is not None for m in mfu) else "n/a (CPU workers)"
    batch = cfg.batch_size if cfg else None
    ran = ran_kernels(run)
    if cfg and cfg.planned_kernels == "liger" and ran == "none" and mfu:
        ran = "none (planned: liger; the workers fell back, their [kernels] log line says why)"
    return Shown(f"batch {batch} per worker, kernels {ran}; MFU per rank: {per_rank}")
