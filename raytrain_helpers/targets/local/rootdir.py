"""``local.temp_root``: a folder the tool owns, marked by a file it writes when it creates the folder.

The cluster writes its state (which names the interpreter its jobs run with), the auth token and every raylet's
temp dir there, so the tool refuses a folder that someone else could have prepared or could change: ``/``,
``/tmp``, the home folder, a file, a symbolic link, a folder owned by another user or writable by group or others,
and an existing non-empty folder without the marker (one holding only what the tool itself writes there is taken
over: folders made before the marker existed). It creates the folder 0700, and every file it writes or reads there
is opened without following a symbolic link (``O_NOFOLLOW``), so a link planted there is refused, never followed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from pathlib import Path

MARKER = ".raytrain-tutorial-temp-root"
#: What the tool writes directly under temp_root (a folder holding only these is the tool's own).
OWN_NAMES = re.compile(r"^(cluster\.json|ray-start\.log|auth_token|head|worker-\d+|\.raytrain-tutorial-temp-root)$")
#: Bits that let someone other than the owner create, rename or delete entries in a folder.
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


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
        f"needs a folder of its own. Fix: set local.temp_root to a new folder, e.g. `-p temp_root "
        f"/tmp/raytrain-{{uid}}` (or `temp_root: /tmp/raytrain-{{uid}}` under `local:` in env.yaml; {{uid}} is "
        f"your user id), or remove that folder if it is yours"
    )


def ownership_problem(st: os.stat_result) -> str | None:
    """Why a folder's owner or mode lets someone else change it, or None."""
    if st.st_uid != os.geteuid():
        return f"owned by another user (uid {st.st_uid}, you are {os.geteuid()})"
    if st.st_mode & OTHERS_WRITE:
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def problem(root: Path) -> str | None:
    """Why the tool may not use this folder, or None when it may (it is its own, or absent)."""
    shared = _shared_folders()
    real = os.path.realpath(root)
    if real in shared:
        return shared[real]
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"a symbolic link (to {os.readlink(root)!r}), not a folder"
    if not stat.S_ISDIR(st.st_mode):
        return "a file, not a folder"
    why = ownership_problem(st)
    if why:
        return f"a folder {why}"
    if not _is_file(root / MARKER):
        foreign = sorted(p.name for p in root.iterdir() if not OWN_NAMES.match(p.name))
        if foreign:
            listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            return f"an existing folder the tool did not create (it holds {listed} and no {MARKER} marker)"
    return None


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def check(root: Path) -> None:
    """Raise :class:`TempRootError` when the tool does not own ``root`` (creates nothing)."""
    why = problem(root)
    if why:
        raise _refuse(root, why)


def claim(root: Path) -> None:
    """Check ``root``, then create it 0700 (or take over the tool's own older folder, narrowed to 0700) and write
    the marker. A folder that appears between the check and the creation is checked again, never trusted."""
    check(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        check(root)
    os.chmod(root, 0o700, follow_symlinks=False)
    with open_nofollow(root / MARKER, "w") as f:
        f.write("created by raytrain-tutorial: the local Ray cluster's temp root\n")


def own_dir(path: Path) -> Path:
    """``path``, a folder under the temp root, created 0700 if absent; refused when it is a link or not ours."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise TempRootError(f"{path} is not a folder (a symbolic link or a file was put there). Fix: remove it")
    if st.st_uid != os.geteuid():  # its mode may be wide: Ray makes its temp dir 0777, inside our 0700 root
        raise TempRootError(f"{path} is owned by another user (uid {st.st_uid}). Fix: remove it")
    return path


_MODES = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
}


def open_nofollow(path: Path, mode: str = "r", perm: int = 0o600, *, exclusive: bool = False):
    """``open(path, mode)`` of a file in the temp root that refuses a symbolic link (ELOOP) instead of following it,
    and a file owned by another user. ``mode``: r, w or a (text); ``exclusive``: the file must not exist yet."""
    flags = _MODES[mode] | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_EXCL if exclusive else 0)
    try:
        fd = os.open(path, flags, perm)
    except OSError as e:
        if e.errno == errno.ELOOP:  # the last component is a symbolic link
            raise TempRootError(
                f"{path} is a symbolic link; the tool never follows one in its temp root. Fix: remove it"
            ) from None
        raise
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise TempRootError(f"{path} is not a file of yours (owner uid {st.st_uid}). Fix: remove it")
    return os.fdopen(fd, mode)


def read_text(path: Path) -> str:
    """The text of a file the tool wrote in its temp root, never through a symbolic link."""
    with open_nofollow(path) as f:
        return f.read()
