"""Execute the tutorial notebooks in order with papermill (what ``raytrain-tutorial run`` drives).

Executed copies land in ``runs/<run_name>/notebooks/``; ``runs/<run_name>/run_state.json`` records each
notebook's outcome and the parameters it ran with. Re-running resumes: notebooks that already succeeded
with the same parameters are skipped, from the first one that did not; the cluster step (02) is run again
before a resumed later step because it is idempotent (it reuses a running cluster). The run stops at the
first failing cell and shows it.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.config import ConfigError, Settings, loaded_env_file
from ..core.paths import notebooks_dir, run_dir
from ..core.tables import table
from ..targets import for_settings

#: The notebook re-run before a resumed later one: it brings the cluster up again, or reuses a running one.
CLUSTER_STEP = "02_cluster"


def list_notebooks(directory: Path | None = None) -> list[Path]:
    """The tutorial's numbered notebooks (``NN_name.ipynb``), in order."""
    d = directory or notebooks_dir()
    return sorted(p for p in d.glob("[0-9][0-9]_*.ipynb"))


@dataclass
class NotebookResult:
    """One notebook's outcome in a run."""

    name: str
    status: str  # ok | failed | skipped | not run
    seconds: float = 0.0
    detail: str = ""


def notebook_params(
    settings: Settings, params: dict[str, Any], env_file: str | None, files: list[str]
) -> dict[str, Any]:
    """The papermill parameters every notebook gets: the given ones, run_name, target and the settings files."""
    nb_params = dict(params)
    nb_params["run_name"] = settings.run_name
    nb_params["target"] = for_settings(settings).NAME
    if env_file:
        nb_params["env_file"] = str(Path(env_file).resolve())
    elif loaded_env_file(settings):
        nb_params["env_file"] = loaded_env_file(settings)
    if files:
        nb_params["override_files"] = [str(Path(f).resolve()) for f in files]
    return nb_params


def check_selectors(names: list[str], only: list[str] | None, start_from: str | None) -> None:
    """Every ``--only`` / ``--from`` value must start some notebook's name."""
    for sel in (only or []) + ([start_from] if start_from else []):
        if not any(n.startswith(sel) for n in names):
            raise ConfigError(f"no notebook matches {sel!r}. Fix: one of {', '.join(names)}")


def select_steps(
    names: list[str], done: set[str], only: list[str] | None = None, start_from: str | None = None
) -> tuple[list[str], set[str]]:
    """Which notebooks the run shows, and which of them it executes.

    ``--from`` runs from that notebook on; ``--only`` runs the chosen ones; otherwise the run resumes at the
    first notebook not in ``done`` and re-runs the cluster step before it when that step came earlier.
    """
    selected = [n for n in names if not only or any(n.startswith(s) for s in only)]
    if start_from:
        i = next(i for i, n in enumerate(selected) if n.startswith(start_from))
        selected = selected[i:]
        return selected, set(selected)
    if only:
        return selected, set(selected)
    first = next((i for i, n in enumerate(selected) if n not in done), None)
    to_run = set() if first is None else set(selected[first:])
    if first is not None and first > 0 and CLUSTER_STEP in selected[:first]:
        to_run.add(CLUSTER_STEP)  # idempotent: reuse or restart the cluster before resuming
    return selected, to_run


def _params_hash(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _state_path(rd: Path) -> Path:
    return rd / "run_state.json"


def _load_state(rd: Path) -> dict[str, Any]:
    try:
        return json.loads(_state_path(rd).read_text())
    except (OSError, ValueError):
        return {}


def _save_state(rd: Path, state: dict[str, Any]) -> None:
    tmp = _state_path(rd).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(_state_path(rd))


def run_notebooks(
    settings: Settings,
    *,
    params: dict[str, Any],
    env_file: str | None,
    files: list[str],
    only: list[str] | None = None,
    start_from: str | None = None,
    force: bool = False,
    kernel: str = "python3",
    stream_output: bool = False,
) -> list[NotebookResult]:
    """Run the notebooks (see the module docstring), print a summary table and return each one's outcome."""
    rd = run_dir(settings)
    out_dir = rd / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    nbs = list_notebooks()
    if not nbs:
        raise FileNotFoundError(f"no notebooks found in {notebooks_dir()}")
    names = [p.stem for p in nbs]
    check_selectors(names, only, start_from)
    nb_params = notebook_params(settings, params, env_file, files)
    phash = _params_hash(nb_params)
    state = {} if force else _load_state(rd)
    done = {k for k, v in state.get("steps", {}).items() if v.get("status") == "ok" and v.get("params") == phash}
    selected, to_run = select_steps(names, done, only, start_from)

    results: list[NotebookResult] = []
    failed = False
    state.setdefault("steps", {})
    state["params"] = nb_params
    by_name = {p.stem: p for p in nbs}
    for name in selected:
        nb = by_name[name]
        if failed:
            results.append(NotebookResult(name, "not run"))
            continue
        if name not in to_run:
            results.append(NotebookResult(name, "skipped", detail="done earlier with the same parameters"))
            continue
        out = out_dir / nb.name
        result = _execute(nb, out, nb_params, kernel, stream_output)
        results.append(result)
        failed = result.status == "failed"
        record = {"status": result.status, "params": phash, "seconds": round(result.seconds, 1), "output": str(out)}
        state["steps"][name] = {**record, "error": result.detail} if failed else record
        _save_state(rd, state)
    print()
    table(
        [(r.name, r.status, f"{r.seconds:.0f} s" if r.seconds else "", r.detail) for r in results],
        ["notebook", "status", "time", "detail"],
        title=f"run {settings.run_name!r} on target {for_settings(settings).NAME!r}",
        max_width=100,
    )
    return results


def _execute(nb: Path, out: Path, nb_params: dict[str, Any], kernel: str, stream_output: bool) -> NotebookResult:
    """One notebook through papermill; a failing cell is shown on stderr."""
    import papermill as pm

    print(f"==> {nb.stem}", flush=True)
    t0 = time.time()
    try:
        pm.execute_notebook(
            str(nb),
            str(out),
            parameters=nb_params,
            kernel_name=kernel,
            cwd=str(nb.parent),
            progress_bar=False,
            log_output=stream_output,
            request_save_on_cell_execute=True,
        )
    except pm.PapermillExecutionError as e:
        detail = f"cell {e.exec_count}: {e.ename}: {str(e.evalue)[:300]}"
        result = NotebookResult(nb.stem, "failed", time.time() - t0, detail)
        _show_failure(e, out)
        return result
    return NotebookResult(nb.stem, "ok", time.time() - t0, str(out))


def _show_failure(err, out: Path) -> None:
    print(f"\n!! {out.name} failed in cell {err.exec_count}: {err.ename}: {err.evalue}", file=sys.stderr)
    src = (err.cell_source if hasattr(err, "cell_source") else "").strip()
    if src:
        print("---- the failing cell ----", file=sys.stderr)
        print(src, file=sys.stderr)
    tb = "\n".join(err.traceback[-6:]) if getattr(err, "traceback", None) else ""
    if tb:
        print("---- traceback (last frames) ----", file=sys.stderr)
        print(re.sub(r"\x1b\[[0-9;]*m", "", tb), file=sys.stderr)
    print(f"(the executed notebook is {out}; re-run to resume from this step)", file=sys.stderr)
