"""Where things live: the package, its manifests and notebooks, and the runs directory."""

from __future__ import annotations

import os
from pathlib import Path

from .config import Settings, loaded_env_file

#: The ``raytrain_helpers`` package directory (what travels to the cluster as the job's working_dir).
PACKAGE_DIR = Path(__file__).resolve().parent.parent
#: The repository (or working folder) that holds env.yaml, manifests/ and notebooks/.
REPO_ROOT = PACKAGE_DIR.parent


def manifests_dir() -> Path:
    """The Jinja templates the manifests are rendered from."""
    d = REPO_ROOT / "manifests"
    if not d.is_dir():  # pragma: no cover - an installed wheel without the repository
        raise FileNotFoundError(f"manifests/ not found next to the package ({d})")
    return d


def notebooks_dir() -> Path:
    """The tutorial's notebooks (``RAYTRAIN_NOTEBOOKS_DIR`` overrides)."""
    return Path(os.environ.get("RAYTRAIN_NOTEBOOKS_DIR", REPO_ROOT / "notebooks"))


def runs_dir(settings: Settings) -> Path:
    """Every run's records: ``runs/`` beside env.yaml (or the working directory); ``RAYTRAIN_RUNS_DIR`` overrides."""
    env_file = loaded_env_file(settings)
    base = Path(env_file).parent if env_file else Path.cwd()
    return Path(os.environ.get("RAYTRAIN_RUNS_DIR", base / "runs")).resolve()


def run_dir(settings: Settings, run_name: str | None = None) -> Path:
    """One run's folder (created): job records, logs, benchmark results."""
    d = runs_dir(settings) / (run_name or settings.run_name)
    d.mkdir(parents=True, exist_ok=True)
    return d
