"""08 · Teardown: everything the tutorial created, removed in reverse order and checked by listing what is left.

On aws nothing is deleted without ``assume_yes`` (papermill runs never prompt).
"""

from __future__ import annotations

from ..core.settings import Settings
from ..targets import StepResult, for_settings


def run(settings: Settings, *, assume_yes: bool = False) -> StepResult:
    """Notebook 08's entry point."""
    return for_settings(settings).teardown(settings, assume_yes=assume_yes)
