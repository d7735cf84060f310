"""``local.temp_root``: a folder the tool owns, marked by a file it writes when it creates the folder.

The cluster writes its state, the auth token and every raylet's temp dir there, so the tool refuses a folder it
does not own: ``/``, ``/tmp``, the home folder, a file, or an existing non-empty folder without the marker (one
holding only what the tool itself writes there is taken over: folders made before the marker existed).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

MARKER = ".raytrain-tutorial-temp-root"
#: What the tool writes directly under temp_root (a folder holding only these is the tool's own).
OWN_NAMES = re.compile(r"^(cluster\.json|ray-start\.log|auth_token|head|worker-\d+|\.raytrain-tutorial-temp-root)$")


class TempRootError(RuntimeError):
    pass


def _shared_folders() -> dict[str, str]:
    out = {"/": "the root folder", "/tmp": "the shared /tmp"}
    out[os.path.realpath(tempfile.gettempdir())] = "the shared temp folder"
    home = os.environ.get("HOME")
    if home:
        out[os.path.realpath(home)] = "your home folder"
    return out


def _refuse(root: Path, why: str) -> TempRootError:
    return TempRootError(
        f"local.temp_root = {str(root)!r} is {why}; the tool writes there and stops only what it started, so it "
        f"needs a folder of its own. Fix: set local.temp_root to a new folder, e.g. `-p temp_root /tmp/raytrain` "
        f"(or `temp_root: /tmp/raytrain` under `local:` in env.yaml)"
    )


def problem(root: Path) -> str | None:
    """Why the tool may not use this folder, or None when it may (it is its own, or absent)."""
    real = os.path.realpath(root)
    shared = _shared_folders()
    if real in shared:
        return shared[real]
    if root.exists() and not root.is_dir():
        return "a file, not a folder"
    if root.is_dir() and not (root / MARKER).is_file():
        foreign = sorted(p.name for p in root.iterdir() if not OWN_NAMES.match(p.name))
        if foreign:
            listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            return f"an existing folder the tool did not create (it holds {listed} and no {MARKER} marker)"
    return None


def check(root: Path) -> None:
    """Raise :class:`TempRootError` when the tool does not own ``root`` (creates nothing)."""
    why = problem(root)
    if why:
        raise _refuse(root, why)


def claim(root: Path) -> None:
    """Check ``root``, then create it (or take over the tool's own older folder) and write the marker."""
    check(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("created by raytrain-tutorial: the local Ray cluster's temp root\n")
