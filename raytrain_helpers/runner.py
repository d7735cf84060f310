"""``raytrain-tutorial run``: execute the notebooks in order with papermill.

Executed copies land in ``runs/<run_name>/notebooks/``; ``runs/<run_name>/run_state.json`` records each
notebook's outcome and the parameters it ran with. Re-running resumes: notebooks that already succeeded
with the same parameters are skipped, from the first one that did not; the cluster step (02) is run again
before a resumed later step because it is idempotent (it reuses a running cluster). The run stops at the
first failing cell and shows it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ConfigError, Settings, load

REPO_ROOT = Path(__file__).resolve().parent.parent
CLUSTER_STEP = "02_cluster"


def notebooks_dir() -> Path:
    return Path(os.environ.get("RAYTRAIN_NOTEBOOKS_DIR", REPO_ROOT / "notebooks"))


def list_notebooks(directory: Path | None = None) -> list[Path]:
    d = directory or notebooks_dir()
    return sorted(p for p in d.glob("[0-9][0-9]_*.ipynb"))


@dataclass
class StepResult:
    name: str
    status: str          # ok | failed | skipped | not run
    seconds: float = 0.0
    detail: str = ""


def _params_hash(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _state_path(run_dir: Path) -> Path:
    return run_dir / "run_state.json"


def _load_state(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads(_state_path(run_dir).read_text())
    except (OSError, ValueError):
        return {}


def _save_state(run_dir: Path, state: dict[str, Any]) -> None:
    tmp = _state_path(run_dir).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(_state_path(run_dir))


def run_notebooks(settings: Settings, *, params: dict[str, Any], env_file: str | None, files: list[str],
                  only: list[str] | None = None, start_from: str | None = None, force: bool = False,
                  kernel: str = "python3", stream_output: bool = False) -> list[StepResult]:
    import papermill as pm

    from .jobs import run_dir as _run_dir
    from .report import table

    rd = _run_dir(settings)
    out_dir = rd / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    nbs = list_notebooks()
    if not nbs:
        raise FileNotFoundError(f"no notebooks found in {notebooks_dir()}")
    names = [p.stem for p in nbs]
    for sel in (only or []) + ([start_from] if start_from else []):
        if not any(n.startswith(sel) for n in names):
            raise ConfigError(f"no notebook matches {sel!r}. Fix: one of {', '.join(names)}")
    nb_params = dict(params)
    nb_params["run_name"] = settings.run_name
    nb_params["target"] = settings.target
    if env_file:
        nb_params["env_file"] = str(Path(env_file).resolve())
    elif settings.__dict__.get("_env_file"):
        nb_params["env_file"] = settings.__dict__["_env_file"]
    if files:
        nb_params["override_files"] = [str(Path(f).resolve()) for f in files]
    phash = _params_hash(nb_params)
    state = {} if force else _load_state(rd)
    done = {k for k, v in state.get("steps", {}).items() if v.get("status") == "ok" and v.get("params") == phash}

    selected = [p for p in nbs if not only or any(p.stem.startswith(s) for s in only)]
    if start_from:
        i = next(i for i, p in enumerate(selected) if p.stem.startswith(start_from))
        selected = selected[i:]
        to_run = set(p.stem for p in selected)
    elif only:
        to_run = set(p.stem for p in selected)
    else:
        first = next((i for i, p in enumerate(selected) if p.stem not in done), None)
        to_run = set() if first is None else {p.stem for p in selected[first:]}
        if first is not None and first > 0 and any(p.stem == CLUSTER_STEP for p in selected[:first]):
            to_run.add(CLUSTER_STEP)  # idempotent: reuse or restart the cluster before resuming

    results: list[StepResult] = []
    failed = False
    state.setdefault("steps", {})
    state["params"] = nb_params
    for nb in selected:
        name = nb.stem
        if failed:
            results.append(StepResult(name, "not run"))
            continue
        if name not in to_run:
            results.append(StepResult(name, "skipped", detail="done earlier with the same parameters"))
            continue
        out = out_dir / nb.name
        print(f"==> {name}", flush=True)
        t0 = time.time()
        try:
            pm.execute_notebook(str(nb), str(out), parameters=nb_params, kernel_name=kernel, cwd=str(nb.parent),
                                progress_bar=False, log_output=stream_output, request_save_on_cell_execute=True)
            dt = time.time() - t0
            results.append(StepResult(name, "ok", dt, str(out)))
            state["steps"][name] = dict(status="ok", params=phash, seconds=round(dt, 1), output=str(out))
        except pm.PapermillExecutionError as e:
            dt = time.time() - t0
            failed = True
            detail = f"cell {e.exec_count}: {e.ename}: {str(e.evalue)[:300]}"
            results.append(StepResult(name, "failed", dt, detail))
            state["steps"][name] = dict(status="failed", params=phash, seconds=round(dt, 1), output=str(out),
                                        error=detail)
            _show_failure(e, out)
        _save_state(rd, state)
    print()
    table([(r.name, r.status, f"{r.seconds:.0f} s" if r.seconds else "", r.detail) for r in results],
          ["notebook", "status", "time", "detail"], title=f"run {settings.run_name!r} on target {settings.target!r}",
          max_width=100)
    return results


def _show_failure(err, out: Path) -> None:
    print(f"\n!! {out.name} failed in cell {err.exec_count}: {err.ename}: {err.evalue}", file=sys.stderr)
    src = (err.cell_source if hasattr(err, "cell_source") else "").strip()
    if src:
        print("---- the failing cell ----", file=sys.stderr)
        print(src, file=sys.stderr)
    tb = "\n".join(err.traceback[-6:]) if getattr(err, "traceback", None) else ""
    if tb:
        import re
        print("---- traceback (last frames) ----", file=sys.stderr)
        print(re.sub(r"\x1b\[[0-9;]*m", "", tb), file=sys.stderr)
    print(f"(the executed notebook is {out}; re-run to resume from this step)", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

def register_cli(sub) -> None:
    from .cli import add_settings_args
    p = sub.add_parser("run", help="execute the tutorial notebooks in order (papermill) into runs/<run_name>/")
    add_settings_args(p)
    p.add_argument("--run-name", default=None, help="names runs/<run_name>/ (default: env.yaml run_name)")
    p.add_argument("--only", action="append", default=None, metavar="NB", help="run only notebooks starting with NB")
    p.add_argument("--from", dest="start_from", default=None, metavar="NB", help="start at notebook NB")
    p.add_argument("--force", action="store_true", help="re-run finished notebooks too")
    p.add_argument("--kernel", default="python3")
    p.add_argument("--log-output", action="store_true", help="stream the notebooks' output while they run")
    p.add_argument("--list", action="store_true", help="list the notebooks and their parameters, run nothing")
    p.set_defaults(func=_cli_run)

    d = sub.add_parser("down", help="tear everything down: the local Ray cluster, or on aws the RayCluster, "
                                     "operator, plugins, node group and cluster in reverse order (needs --yes)")
    add_settings_args(d)
    d.add_argument("--yes", action="store_true", help="aws: confirm the deletion (never prompts)")
    d.set_defaults(func=_cli_down)


def _cli_run(args: argparse.Namespace) -> int:
    params = {k: v for k, v in (args.params or [])}
    if args.run_name:
        params["run_name"] = args.run_name
    if args.target:
        params["target"] = args.target
    settings = load(args.env_file, files=args.files, **params)   # fail fast on bad values
    if args.list:
        import papermill as pm
        for nb in list_notebooks():
            ps = pm.inspect_notebook(str(nb))
            print(f"{nb.stem}: " + ", ".join(f"{k}={v['default']}" for k, v in ps.items()))
        return 0
    t0 = time.time()
    typed = {k: _typed(v) for k, v in params.items()}
    results = run_notebooks(settings, params=typed, env_file=args.env_file, files=args.files, only=args.only,
                            start_from=args.start_from, force=args.force, kernel=args.kernel,
                            stream_output=args.log_output)
    bad = [r for r in results if r.status == "failed"]
    print(f"total {time.time() - t0:.0f} s; " + ("FAILED at " + bad[0].name if bad else "all notebooks succeeded"))
    return 1 if bad else 0


def _typed(v: Any) -> Any:
    from .config import _coerce_scalar
    return _coerce_scalar(v) if isinstance(v, str) else v


def _cli_down(args: argparse.Namespace) -> int:
    from .cli import settings_from_args
    s = settings_from_args(args)
    from .cluster import teardown
    result = teardown(s, assume_yes=bool(getattr(args, "yes", False)))
    result.show()
    return 0 if result.ok else 1
