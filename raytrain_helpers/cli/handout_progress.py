"""Where each workshop attendee really is, from what their runs recorded in their folder (never by running or
importing anything of it): ``runs/<run>/progress.json`` (every notebook's kernel writes it, however it ran:
:mod:`..steps.progress`), ``runs/<run>/run_state.json`` (``raytrain-tutorial run``), ``runs/<run>/job.json``
(05's job), ``runs/<run>/verify.json`` (06's verdict), and the notebooks saved in their folder. Only regular files
that lie inside the attendee's folder, links resolved, are read.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..steps.progress import PROGRESS_FILE, VERDICT_FILE


def inside(folder: Path, path: Path) -> bool:
    """Whether ``path`` is a regular file that, links resolved, lies inside ``folder``."""
    try:
        return path.is_file() and path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def _record(folder: Path, path: Path) -> tuple[dict[str, Any], float]:
    """A JSON record of the attendee's folder and its modification time ({} and 0 when absent or outside)."""
    if not inside(folder, path):
        return {}, 0.0
    try:
        data = json.loads(path.read_text())
        return (data if isinstance(data, dict) else {}), path.stat().st_mtime
    except (OSError, ValueError):
        return {}, 0.0


def saved_notebooks(folder: Path) -> tuple[list[str], str]:
    """The notebooks ("01".."08") saved in the attendee's folder with an executed cell (JupyterLab, saved), and the
    last error output among them (``NN: name: value``, or '')."""
    ran, error = [], ""
    for nb in sorted((folder / "notebooks").glob("[0-9]*.ipynb")):
        data, _ = _record(folder, nb)
        cells = data.get("cells") if isinstance(data.get("cells"), list) else []
        code = [c for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]
        if any(c.get("execution_count") for c in code):
            ran.append(nb.stem[:2])
        for c in code:
            for o in c.get("outputs") or []:
                if isinstance(o, dict) and o.get("output_type") == "error":
                    error = f"{nb.stem[:2]}: {o.get('ename', '')}: {o.get('evalue', '')}"[:200]
    return ran, error


def attendee_progress(folder: Path, run_name: str, *, now: float | None = None) -> dict[str, Any]:
    """``notebook``: the last notebook reached; ``failure``: the last failure (``NN: message``) or ``-``;
    ``job``: the last job's status (and id); ``verdict``: 06's (``passed``, ``failed: rows``, ``not applicable``);
    ``ago``: how long since the last thing recorded; ``rows``: 06's verification table."""
    run = folder / "runs" / run_name
    prog, t_prog = _record(folder, run / PROGRESS_FILE)
    state, t_state = _record(folder, run / "run_state.json")
    job, t_job = _record(folder, run / "job.json")
    ver, t_ver = _record(folder, run / VERDICT_FILE)
    steps = state.get("steps") if isinstance(state.get("steps"), dict) else {}
    saved, saved_error = saved_notebooks(folder)
    reached = [str(prog.get("last_notebook") or "")] + [str(k)[:2] for k in steps] + saved
    reached = [r for r in reached if r[:2].isdigit()]
    failure = _last_failure(prog, steps)
    failure = saved_error if failure == "-" and saved_error else failure
    verdict = str(ver.get("verdict") or "-")
    failed = [str(x) for x in ver.get("failed") or [] if isinstance(x, str)]
    if verdict == "failed" and failed:
        verdict += ": " + ", ".join(failed)
    times = [t for t in (_num(prog.get("last_at")), t_prog, t_state, t_job, t_ver) if t]
    sid = str(job.get("submission_id") or "")
    rows = ver.get("rows") if isinstance(ver.get("rows"), list) else []
    last = str(prog.get("last_notebook") or "")[:2]
    return dict(
        notebook=last if last.isdigit() else max(reached or ["-"])[:2],
        failure=failure,
        job=(str(job.get("status") or "recorded") + (f" ({sid})" if sid else "")) if job else "-",
        verdict=verdict,
        ago=_ago((now or time.time()) - max(times)) if times else "-",
        rows=[r for r in rows if isinstance(r, dict)],
    )


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _last_failure(prog: dict[str, Any], steps: dict[str, Any]) -> str:
    last = prog.get("last_failure") if isinstance(prog.get("last_failure"), dict) else None
    if last:
        return f"{str(last.get('notebook', '?'))[:2]}: {str(last.get('message', ''))[:200]}"
    failed = [(k, v) for k, v in steps.items() if isinstance(v, dict) and v.get("status") == "failed"]
    if failed:
        name, step = failed[-1]
        return f"{str(name)[:2]}: {str(step.get('error') or 'failed').strip().splitlines()[-1][:200]}"
    return "-"


def _ago(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s} s ago"
    if s < 7200:
        return f"{s // 60} min ago"
    return f"{s // 3600} h ago" if s < 172800 else f"{s // 86400} days ago"


__all__ = ["attendee_progress", "inside", "saved_notebooks"]
