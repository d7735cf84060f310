"""What a run records of its notebooks, however they ran (JupyterLab, saved or not; papermill; ``raytrain-tutorial
run``), and 06's verdict: the files a workshop's ``handout status`` and ``handout report`` read.

* ``runs/<run>/progress.json``: written from inside the notebook's kernel. Each notebook's first cell calls
  :func:`notebook_started` (through ``rt.describe(..., notebook="NN")``), which records the notebook and registers
  an IPython ``post_run_cell`` callback (IPython's ``shell.events``: the callback gets the cell's
  ``ExecutionResult``, whose ``error_in_exec``/``error_before_exec`` hold the exception); every cell after that
  counts in the record, and a cell that raises is the run's last failure, with its notebook and message.
* ``runs/<run>/verify.json``: 06's verdict (:func:`record_verdict`, called by ``steps.verify.run``): ``passed``,
  ``failed`` or ``not applicable`` (no row passed or failed), the rows that failed, and every row.

Both are written atomically (a temporary file, then a rename) and hold plain JSON: no code, nothing run on read.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..core.criteria import FAIL, PASS
from ..core.paths import run_dir
from ..core.settings import Settings

PROGRESS_FILE = "progress.json"
VERDICT_FILE = "verify.json"
#: A failure's message is cut to this many characters (the traceback stays in the notebook).
MESSAGE_CHARS = 400

_HOOK: dict[str, Any] = {}


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(path)


def read(path: Path) -> dict[str, Any]:
    """A record as a dict ({} when absent or not JSON)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _update(settings: Settings, change) -> None:
    path = run_dir(settings) / PROGRESS_FILE
    data = read(path)
    data.setdefault("notebooks", {})
    change(data, time.time())
    _write(path, data)


def ipython_shell():
    """The IPython shell this code runs in (a notebook's kernel); None in a script, a test or without IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def notebook_started(settings: Settings, notebook: str, *, shell=None) -> None:
    """In a notebook's kernel (an IPython shell): record that ``notebook`` ("01".."08") started, and count every
    later cell of this kernel into it. Outside IPython (a script, a test) nothing is recorded."""
    shell = shell or ipython_shell()
    if shell is None:
        return

    def start(data: dict[str, Any], now: float) -> None:
        nb = data["notebooks"].setdefault(notebook, {"cells": 0, "errors": 0})
        nb["started"] = now
        data.update(last_notebook=notebook, last_at=now)

    _update(settings, start)
    if _HOOK.get("shell") is shell:
        shell.events.unregister("post_run_cell", _HOOK["callback"])

    def after_cell(result) -> None:  # noqa: ANN001 - IPython's ExecutionResult
        try:
            cell_done(settings, notebook, result.error_in_exec or result.error_before_exec)
        except OSError:
            pass  # a record that cannot be written never breaks the attendee's notebook

    shell.events.register("post_run_cell", after_cell)
    _HOOK.update(shell=shell, callback=after_cell)


def cell_done(settings: Settings, notebook: str, error: BaseException | None) -> None:
    """One cell of ``notebook`` ran: counted; one that raised is the run's last failure."""

    def count(data: dict[str, Any], now: float) -> None:
        nb = data["notebooks"].setdefault(notebook, {"cells": 0, "errors": 0})
        nb["cells"] += 1
        data.update(last_notebook=notebook, last_at=now)
        if error is not None:
            nb["errors"] += 1
            message = f"{type(error).__name__}: {error}"[:MESSAGE_CHARS]
            data["last_failure"] = {"notebook": notebook, "message": message, "at": now}
            nb["last_error"] = message
        else:
            nb["ok_at"] = now

    _update(settings, count)


def verdict(criteria) -> str:
    """``passed`` (no row failed, one passed), ``failed`` (a row failed) or ``not applicable`` (neither)."""
    statuses = {c.status for c in criteria.items}
    return "failed" if FAIL in statuses else "passed" if PASS in statuses else "not applicable"


def record_verdict(settings: Settings, criteria, *, submission_id: str = "") -> dict[str, Any]:
    """06's verdict in ``runs/<run>/verify.json`` (see the module's docstring); returns what was written."""
    data = {
        "verdict": verdict(criteria),
        "failed": [c.name for c in criteria.items if c.status == FAIL],
        "rows": [{"status": c.status, "criterion": c.name, "evidence": c.evidence} for c in criteria.items],
        "submission_id": submission_id,
        "at": time.time(),
    }
    _write(run_dir(settings) / VERDICT_FILE, data)
    return data


__all__ = [
    "ipython_shell",
    "MESSAGE_CHARS",
    "PROGRESS_FILE",
    "VERDICT_FILE",
    "cell_done",
    "notebook_started",
    "read",
    "record_verdict",
    "verdict",
]
