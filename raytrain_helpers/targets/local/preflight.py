"""Before anything on the local path: what it needs on this machine (the Python packages the raylets and the job
import), one row each. Nothing here is billable, so nothing waits on it; ``raytrain-tutorial check`` prints it."""

from __future__ import annotations

import sys
from importlib import metadata

from ...core.settings import Settings
from ..base import PreflightResult, Requirement

#: The distributions the local cluster and the training job import.
PACKAGES = ("ray", "torch", "transformers")
FIX = "install the pinned packages: .venv/bin/uv pip install -c constraints.txt -e ."


def preflight(settings: Settings, *, quota: bool = True) -> PreflightResult:
    """Python and the packages the local path imports (``quota`` is aws only)."""
    py = ".".join(map(str, sys.version_info[:3]))
    rows = [Requirement("Python", py, ">= 3.10", "ok" if sys.version_info >= (3, 10) else "TOO OLD", "")]
    for name in PACKAGES:
        try:
            rows.append(Requirement(name, metadata.version(name), "installed", "ok"))
        except metadata.PackageNotFoundError:
            rows.append(Requirement(name, "not installed", "installed", "MISSING", FIX))
    return PreflightResult(target="local", rows=rows)


__all__ = ["preflight"]
