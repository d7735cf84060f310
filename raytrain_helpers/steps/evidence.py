"""The evidence outlives the cluster: every log an audit reads is saved in the run's folder as soon as it is read.

``runs/<run>/evidence/<kind>/`` holds one reading: ``train`` (06's: the training job), ``transport-check`` (05's
all-reduce check), ``bench-<label>`` (07's variants). Each folder has

* ``evidence.json``: what was read, when, from where, and what it is judged against: the job's record as 05 wrote
  it (``job``), the transport expected, 06's infrastructure rows and the job's status on the cluster at the time;
* ``job.log``: the job's driver log (every rank's ``SUCCESS`` line is there);
* ``workers/<NN>/worker-*.out|err``: each training worker's own log (NCCL prints there), one folder per source
  (a raylet's session logs, or a pod), the file names as Ray wrote them.

``raytrain-tutorial audit runs/<run>/evidence/train`` reads such a folder; 08 saves what is missing before it
deletes anything (:func:`collect_missing` in :mod:`.teardown`).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clients.rayjobs import JobRun
from ..core.constants import SUCCESS_RE
from ..core.paths import run_dir
from ..core.settings import Settings
from ..nccl import WORKER_FILE

#: The folder under ``runs/<run>/`` and the manifest's name.
FOLDER = "evidence"
MANIFEST = "evidence.json"
#: The manifest's format (a reader refuses another).
VERSION = 1


def folder(settings: Settings, kind: str, run_name: str | None = None) -> Path:
    """``runs/<run>/evidence/<kind>`` (not created)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", kind):
        raise ValueError(f"evidence kind {kind!r}: letters, digits, '.', '_' and '-' only")
    return run_dir(settings, run_name) / FOLDER / kind


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "source"


def save(
    settings: Settings,
    kind: str,
    logs: dict[str, str],
    *,
    run_name: str | None = None,
    job: JobRun | None = None,
    **facts: Any,
) -> Path:
    """Write one reading: the workers' ``logs`` (``{source path: text}``, as a target's ``worker_logs`` returns
    them), the job's record and driver log, and ``facts`` (the expected transport, 06's rows...) in the manifest.
    A second reading of the same kind replaces the first whole (the folder is rewritten, never mixed)."""
    d = folder(settings, kind, run_name)
    workers = d / "workers"
    if workers.exists():
        for f in sorted(workers.rglob("*"), reverse=True):
            f.rmdir() if f.is_dir() else f.unlink()
    workers.mkdir(parents=True, exist_ok=True)
    sources: dict[str, list[str]] = {}
    files: dict[str, str] = {}
    for path, text in sorted(logs.items()):
        base, _, name = path.replace(":", "/").rpartition("/")
        if not WORKER_FILE.match(name):
            name = f"worker-{_safe(name)}.out"
        group = sources.setdefault(base, [])
        sub = workers / f"{len(sources) - 1:02d}"
        sub.mkdir(exist_ok=True)
        (sub / name).write_text(text)
        group.append(name)
        files[f"workers/{sub.name}/{name}"] = path
    if job is not None:
        (d / "job.log").write_text(job.logs or "")
    manifest = dict(
        version=VERSION,
        kind=kind,
        run_name=run_name or settings.run_name,
        saved_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        files=files,
        job=job.to_json() if job is not None else None,
        **facts,
    )
    (d / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str))
    return d


@dataclass
class Evidence:
    """One saved reading, read back from its folder."""

    path: Path
    manifest: dict[str, Any]
    logs: dict[str, str] = field(default_factory=dict)
    job_log: str = ""

    @property
    def job(self) -> JobRun | None:
        rec = self.manifest.get("job")
        return JobRun.from_json(rec, logs=self.job_log) if rec else None

    @property
    def expected(self) -> str:
        return str(self.manifest.get("expected") or "auto")

    def success(self) -> tuple[set[int], int]:
        """Ranks that printed ``SUCCESS`` in the saved driver log, and the world size they name."""
        ranks, world = set(), 0
        for m in re.finditer(SUCCESS_RE, self.job_log):
            ranks.add(int(m.group(1)))
            world = max(world, int(m.group(2)))
        return ranks, world


def is_evidence(path: Path) -> bool:
    """True for a folder :func:`save` wrote."""
    return (Path(path) / MANIFEST).is_file()


def load(path: Path | str) -> Evidence:
    """Read one reading back (an OSError naming the fix when the folder is not one)."""
    path = Path(path)
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise OSError(
            f"{path} holds no readable {MANIFEST} ({e}). Fix: pass a folder runs/<run>/{FOLDER}/<kind> that 06, "
            "07 or 08 wrote"
        ) from None
    if manifest.get("version") != VERSION:
        raise OSError(f"{path / MANIFEST}: format {manifest.get('version')!r}, this package reads {VERSION}")
    logs = {}
    for rel, source in (manifest.get("files") or {}).items():
        logs[source] = (path / rel).read_text(errors="replace")
    job_log = (path / "job.log").read_text(errors="replace") if (path / "job.log").is_file() else ""
    return Evidence(path, manifest, logs, job_log)


def saved(settings: Settings, kind: str, run_name: str | None = None) -> Evidence | None:
    """The saved reading of ``kind`` in the run's folder, or None."""
    d = folder(settings, kind, run_name)
    return load(d) if is_evidence(d) else None


def kinds(settings: Settings, run_name: str | None = None) -> list[str]:
    """The readings saved for the run."""
    d = run_dir(settings, run_name) / FOLDER
    return sorted(p.name for p in d.iterdir() if is_evidence(p)) if d.is_dir() else []


__all__ = ["FOLDER", "MANIFEST", "Evidence", "folder", "is_evidence", "kinds", "load", "save", "saved"]
