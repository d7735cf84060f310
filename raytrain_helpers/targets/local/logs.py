"""One run's Ray worker logs from the raylets' session log directories on this machine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...core.constants import MARKER_PREFIX
from ...nccl import WORKER_FILE, check_marker, select_run, sibling_log


def collect_local_logs(log_dirs: Sequence[Path | str], marker: str) -> dict[str, str]:
    """One run's Ray worker logs from each raylet's ``session_latest/logs`` directory.

    Reads ``worker-*.out`` / ``worker-*.err`` and keeps a file when it holds the line
    ``[raytrain] marker=<marker>`` (each training worker prints it at start), plus the ``.err``/``.out``
    sibling of a kept file (the same worker process). Two runs in one Ray session are never mixed.
    Returns ``{"<log dir>/<file name>": text}``; a missing directory is skipped (a raylet may have no
    workers), a path that is not a directory raises."""
    marker = check_marker(marker)
    if isinstance(log_dirs, (str, Path)):
        log_dirs = [log_dirs]
    out: dict[str, str] = {}
    for d in log_dirs:
        d = Path(d)
        if not d.exists():
            continue
        if not d.is_dir():
            raise NotADirectoryError(
                f"log_dirs: {d} is not a directory. Fix: pass each raylet's "
                f"<temp_dir>/session_latest/logs (targets.local.session_log_dirs(settings))"
            )
        texts = _read_worker_files(d)
        kept = select_run(texts, marker)
        for name in list(kept):
            sib = sibling_log(name)
            if sib and sib in texts and sib not in kept and MARKER_PREFIX not in texts[sib]:
                kept[sib] = texts[sib]
        for name in sorted(kept):
            out[f"{d}/{name}"] = kept[name]
    return out


def _read_worker_files(d: Path) -> dict[str, str]:
    """``{file name: text}`` of the directory's worker-*.out/.err files (unreadable ones are skipped)."""
    files = sorted(f for f in d.iterdir() if WORKER_FILE.match(f.name) and f.is_file())
    texts: dict[str, str] = {}
    for f in files:
        try:
            texts[f.name] = f.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
    return texts


__all__ = ["collect_local_logs"]
