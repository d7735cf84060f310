"""Execute the tutorial notebooks in order with papermill (what ``raytrain-tutorial run`` drives).

Executed copies land in ``runs/<run_name>/notebooks/``; ``runs/<run_name>/run_state.json`` records each
notebook's outcome, the resolved settings it ran with (whatever their source: env.yaml, ``-f`` files,
``RAYTRAIN_*`` variables, ``-p``) and its file's fingerprint. Re-running resumes: a notebook runs again when it
never ran, failed, its settings changed, its file changed or its other parameters changed (the summary says
which); from the first such notebook on, everything runs. The cluster step (02) is run again before a resumed
later step because it is idempotent (it reuses a running cluster). The run stops at the first failing cell and
shows it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.loading import loaded_env_file, parse_param
from ..core.paths import notebooks_dir, run_dir, runs_dir
from ..core.settings import FLAT_FIELDS, Settings
from ..core.tables import table
from ..core.validation import ConfigError
from ..targets import for_settings

#: The notebook re-run before a resumed later one: it brings the cluster up again, or reuses a running one.
CLUSTER_STEP = "02_cluster"
#: The last notebook: it stops the cluster, and needs none running.
TEARDOWN_STEP = "08_teardown"


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
    """The papermill parameters every notebook gets: the given ones, run_name, target and the settings files.

    ``params`` holds flat setting names (see :func:`canonical_params`) and notebook-only parameters.
    """
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


def canonical_params(settings: Settings, params: dict[str, Any]) -> dict[str, Any]:
    """``-p`` parameters as the notebooks' parameters cells take them: each setting under its flat name
    (``train.steps`` and ``STEPS`` become ``steps``) with the value the loaded settings hold for it
    (``k8s_version`` stays the string ``"1.30"``)."""
    flat = settings.flat()
    out: dict[str, Any] = {}
    for key, value in params.items():
        name, _ = parse_param(key, value)
        out[name] = flat[name]
    return out


# --------------------------------------------------------------------------------------------
# What to re-run: a pure decision over the recorded state and the current fingerprints
# --------------------------------------------------------------------------------------------

#: Notebook parameters that are paths of the settings files: their contents count (through the settings), not
#: where they are.
PATH_PARAMS = ("env_file", "override_files")


def settings_snapshot(settings: Settings) -> dict[str, Any]:
    """The resolved settings by dotted name (``train.steps``): what a notebook ran with, whatever the source."""
    out: dict[str, Any] = {}
    for key, value in settings.public_dict().items():
        if isinstance(value, dict) and key in settings.__class__.model_fields and key not in ("target", "run_name"):
            out.update({f"{key}.{leaf}": v for leaf, v in value.items()})
        else:
            out[key] = value
    return out


def notebook_digest(path: Path) -> str:
    """A notebook file's fingerprint (its bytes)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def other_params(nb_params: dict[str, Any]) -> dict[str, Any]:
    """The notebook parameters that are not settings (``assume_yes``, ``probe``...), JSON-comparable."""
    rest = {k: v for k, v in nb_params.items() if k not in FLAT_FIELDS and k not in PATH_PARAMS}
    return json.loads(json.dumps(rest, sort_keys=True, default=str))


def _changes(old: dict[str, Any], new: dict[str, Any], limit: int = 3) -> str:
    keys = sorted(set(old) | set(new))
    diffs = [f"{k} {_show(old.get(k))} \u2192 {_show(new.get(k))}" for k in keys if old.get(k) != new.get(k)]
    more = f" (+{len(diffs) - limit} more)" if len(diffs) > limit else ""
    return ", ".join(diffs[:limit]) + more


def _show(value: Any) -> str:
    if value is None:
        return "(unset)"
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else json.dumps(value)


def rerun_reason(
    record: dict[str, Any] | None, settings_now: dict[str, Any], digest_now: str, params_now: dict[str, Any]
) -> str | None:
    """Why a notebook must run again, or None when its last run succeeded with exactly these inputs."""
    if not record:
        return "never ran"
    if record.get("status") != "ok":
        return "failed last time"
    if "settings" not in record:
        return "no settings recorded for its last run"
    if record["settings"] != settings_now:
        return "settings changed: " + _changes(record["settings"], settings_now)
    if record.get("notebook") != digest_now:
        return "notebook changed"
    if record.get("other_params", {}) != params_now:
        return "parameters changed: " + _changes(record.get("other_params", {}), params_now)
    return None


def rerun_reasons(
    steps: dict[str, dict[str, Any]],
    settings_now: dict[str, Any],
    digests: dict[str, str],
    params_now: dict[str, Any],
) -> dict[str, str | None]:
    """:func:`rerun_reason` of every notebook in ``digests`` (name -> digest), from the recorded ``steps``."""
    return {name: rerun_reason(steps.get(name), settings_now, d, params_now) for name, d in digests.items()}


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


def plan_run(
    names: list[str],
    reasons: dict[str, str | None],
    only: list[str] | None = None,
    start_from: str | None = None,
    force: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """The notebooks the run shows, and those it executes with the reason each one runs (pure)."""
    done = {n for n in names if reasons.get(n) is None and not force}
    selected, to_run = select_steps(names, done, only, start_from)
    why: dict[str, str] = {}
    for name in selected:
        if name not in to_run:
            continue
        if force:
            why[name] = "--force"
        elif reasons.get(name):
            why[name] = str(reasons[name])
        elif only or start_from:
            why[name] = "selected (--only/--from)"
        elif name == CLUSTER_STEP and name not in why and not why:
            why[name] = "re-run before resuming (reuses a running cluster)"
        else:
            why[name] = "an earlier notebook ran again"
    return selected, why


def needs_cluster(name: str) -> bool:
    """Whether a notebook works on the running cluster: those after the cluster step, except the teardown."""
    return name > CLUSTER_STEP and name != TEARDOWN_STEP


def check_cluster_first(settings: Settings, to_run: list[str]) -> None:
    """Refuse, before anything is created, a local run whose first notebooks need a cluster that is not running."""
    if not to_run or CLUSTER_STEP in to_run or not needs_cluster(to_run[0]):
        return
    missing = for_settings(settings).cluster_missing(settings)
    if missing is None:
        return
    raise ConfigError(
        f"{to_run[0]} needs {missing}. Fix: start it first with `raytrain-tutorial run --only 02` (or "
        f"`raytrain-tutorial cluster up`), or run from the start without --only"
    )


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
    nbs = list_notebooks()
    if not nbs:
        raise FileNotFoundError(f"no notebooks found in {notebooks_dir()}")
    names = [p.stem for p in nbs]
    check_selectors(names, only, start_from)
    nb_params = notebook_params(settings, params, env_file, files)
    snapshot, extra = settings_snapshot(settings), other_params(nb_params)
    by_name = {p.stem: p for p in nbs}
    digests = {name: notebook_digest(path) for name, path in by_name.items()}
    state = _load_state(runs_dir(settings) / settings.run_name)
    state.setdefault("steps", {})
    selected, why = plan_run(names, rerun_reasons(state["steps"], snapshot, digests, extra), only, start_from, force)
    check_cluster_first(settings, [n for n in selected if n in why])
    rd = run_dir(settings)
    out_dir = rd / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    state["params"] = nb_params
    results: list[NotebookResult] = []
    failed = False
    for name in selected:
        if failed:
            results.append(NotebookResult(name, "not run"))
            continue
        if name not in why:
            results.append(NotebookResult(name, "skipped", detail="done earlier with the same settings and notebook"))
            continue
        out = out_dir / by_name[name].name
        result = _execute(by_name[name], out, nb_params, kernel, stream_output)
        failed = result.status == "failed"
        record = {"status": result.status, "seconds": round(result.seconds, 1), "output": str(out)}
        record.update(settings=snapshot, notebook=digests[name], other_params=extra, reason=why[name])
        state["steps"][name] = {**record, "error": result.detail} if failed else record
        result.detail = result.detail if failed else why[name]
        results.append(result)
        _save_state(rd, state)
    _summary(settings, results)
    if failed:
        report_after_failure(settings)
    return results


def report_billing(settings: Settings) -> None:
    """When a run stops otherwise than at a failed notebook (interrupted, the kernel died): what still bills, without
    tearing anything down; nothing is printed when nothing bills."""
    target = for_settings(settings)
    try:
        still = target.billing(settings)
    except Exception as e:  # noqa: BLE001 - the listing must never hide why the run stopped
        print(f"what still bills could not be read: {e}. Fix: `raytrain-tutorial status --target {target.NAME}`")
        return
    if not still.ok:
        print()
        still.show()


def report_after_failure(settings: Settings) -> None:
    """After a failed notebook: what still bills, its cost per hour and the command that stops it - or, where the
    target's setting asks for it, the teardown and what is left (:meth:`Target.after_failure`)."""
    target = for_settings(settings)
    print()
    try:
        target.after_failure(settings).show()
    except Exception as e:  # noqa: BLE001 - the listing must never hide the notebook's own failure
        print(f"what still bills could not be read: {e}. Fix: `raytrain-tutorial status --target {target.NAME}`")


def _summary(settings: Settings, results: list[NotebookResult]) -> None:
    print()
    table(
        [(r.name, r.status, f"{r.seconds:.0f} s" if r.seconds else "", r.detail) for r in results],
        ["notebook", "status", "time", "why / detail"],
        title=f"run {settings.run_name!r} on target {for_settings(settings).NAME!r}",
        max_width=100,
    )


#: The longest Unix socket path every supported system takes (108 bytes on Linux and 104 on macOS, with the NUL).
MAX_SOCKET_PATH = 103


def kernel_over_unix_sockets(folder: str):
    """Configuration for the notebook kernels: they talk to papermill over Unix sockets in ``folder`` (mode 0700,
    removed after each notebook) instead of TCP ports on 127.0.0.1 that every local user can connect to, where
    messages travel signed but not encrypted and ipykernel prints a warning saying so for every notebook.

    Where ``folder`` is too deep for a socket's path (a long TMPDIR), the kernels keep Jupyter's TCP default."""
    from traitlets.config import Config

    prefix = os.path.join(folder, "kernel")
    if len(prefix) + len("-65535") > MAX_SOCKET_PATH:
        return Config()
    return Config({"KernelManager": {"transport": "ipc", "ip": prefix}})


def _execute(nb: Path, out: Path, nb_params: dict[str, Any], kernel: str, stream_output: bool) -> NotebookResult:
    """One notebook through papermill; a failing cell is shown on stderr."""
    import papermill as pm

    print(f"==> {nb.stem}", flush=True)
    t0 = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="raytrain-kernel-") as sockets:
            pm.execute_notebook(
                str(nb),
                str(out),
                parameters=nb_params,
                kernel_name=kernel,
                cwd=str(nb.parent),
                progress_bar=False,
                log_output=stream_output,
                request_save_on_cell_execute=True,
                config=kernel_over_unix_sockets(sockets),
            )
    except KeyboardInterrupt:
        print(interrupted_message(nb.stem), file=sys.stderr, flush=True)
        raise
    except pm.PapermillExecutionError as e:
        detail = f"cell {e.exec_count}: {e.ename}: {str(e.evalue)[:300]}"
        result = NotebookResult(nb.stem, "failed", time.time() - t0, detail)
        _show_failure(e, out)
        return result
    return NotebookResult(nb.stem, "ok", time.time() - t0, str(out))


def interrupted_message(name: str) -> str:
    """What the learner reads after Ctrl-C stopped a notebook: what goes on running, and what to do next."""
    return (
        f"\ninterrupted during {name}. A job it submitted to the cluster runs on there (05's training job does). "
        f"Run the same command again: it starts again at {name}, and 05 follows that job while it runs, or records "
        f"its results once it has ended, without training anything twice."
    )


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
