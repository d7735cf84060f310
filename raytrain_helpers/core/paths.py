"""Where things live: the package, its manifests and notebooks, and the runs directory.

In a checkout (and an editable install) env.yaml, manifests/ and notebooks/ are read from the top of the
repository. An installed wheel carries copies of them in ``raytrain_helpers/_data/`` (see setup.py), and
``raytrain-tutorial init DIR`` writes env.yaml and the notebooks into a working folder of the user's.
"""

from __future__ import annotations

import os
from pathlib import Path

from .loading import find_env_file, loaded_env_file
from .settings import Settings

#: The ``raytrain_helpers`` package directory (what travels to the cluster as the job's working_dir).
PACKAGE_DIR = Path(__file__).resolve().parent.parent
#: The repository (or working folder) that holds env.yaml, manifests/ and notebooks/.
REPO_ROOT = PACKAGE_DIR.parent
#: The copies an installed wheel carries (absent in a checkout, where the repository's own are used).
PACKAGED_DATA = PACKAGE_DIR / "_data"


def data_path(name: str) -> Path:
    """A shipped file or folder (``env.yaml``, ``manifests``, ``notebooks``): the repository's, else the wheel's."""
    for base in (REPO_ROOT, PACKAGED_DATA):
        if (base / name).exists() and (base / "manifests").is_dir():
            return base / name
    raise FileNotFoundError(
        f"{name} not found: neither in the repository ({REPO_ROOT}) nor in the installed package ({PACKAGED_DATA}). "
        f"Fix: reinstall the package (pip install raytrain-tutorial) or run from a checkout of the repository"
    )


def manifests_dir() -> Path:
    """The Jinja templates the manifests are rendered from."""
    return data_path("manifests")


def _has_notebooks(d: Path) -> bool:
    return d.is_dir() and any(d.glob("[0-9][0-9]_*.ipynb"))


def notebooks_dir() -> Path:
    """The tutorial's notebooks: ``RAYTRAIN_NOTEBOOKS_DIR``, else ``notebooks/`` beside the env.yaml in use (a
    folder ``raytrain-tutorial init`` wrote), else the repository's or the installed package's."""
    if os.environ.get("RAYTRAIN_NOTEBOOKS_DIR"):
        return Path(os.environ["RAYTRAIN_NOTEBOOKS_DIR"])
    env_file = find_env_file()
    if env_file is not None and _has_notebooks(env_file.parent / "notebooks"):
        return env_file.parent / "notebooks"
    return data_path("notebooks")


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
