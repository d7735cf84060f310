"""05 · Train: submit the FSDP job through the Ray Jobs API and follow it.

The same code path serves every target: stage a ``working_dir`` holding this package and a ``job_config.json``,
submit ``python -m raytrain_helpers.worker.entrypoint`` with ``JobSubmissionClient`` (to the address the target's
``job_server`` yields), stream the logs back with a progress bar, and parse the driver's ``RAYTRAIN_RESULT`` line.
Transport variables (NCCL_*, FI_*) and extra pip packages travel in ``runtime_env`` only.

Idempotent: if a job of the same run is still running it is followed, not submitted again; when a run is
submitted again after a failure, Ray Train resumes from its latest checkpoint.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..clients import rayjobs
from ..clients.rayjobs import JobRun
from ..core.config import Settings
from ..core.constants import ENTRYPOINT_MODULE
from ..core.paths import PACKAGE_DIR, run_dir, runs_dir
from ..targets import for_settings


def storage_path(settings: Settings, run_name: str | None = None) -> str:
    """Where Ray Train writes the run's checkpoints: the setting, or the run's own folder."""
    return for_settings(settings).job_defaults(settings).storage_path or str(run_dir(settings, run_name) / "storage")


def job_config(
    settings: Settings,
    *,
    run_name: str | None = None,
    marker: str | None = None,
    steps: int | None = None,
    warmup_steps: int = 0,
    final_checkpoint: bool = True,
) -> dict[str, Any]:
    """The plain JSON config the job's driver and every worker read (``job_config.json``)."""
    t = settings.train
    return dict(
        run_name=run_name or settings.run_name,
        marker=marker or uuid.uuid4().hex[:12],
        model=settings.model_config_dict(),
        preset=t.model_preset,
        model_id=t.model_id or None,
        steps=steps or t.steps,
        seq_len=t.seq_len,
        batch_size=t.batch_size,
        learning_rate=t.learning_rate,
        seed=t.seed,
        checkpoint_every=t.checkpoint_every,
        num_workers=t.num_workers,
        precision=t.precision,
        # aws: the driver decides from the cluster (GPU nodes -> NCCL; a CPU-only cluster -> gloo, which
        # then fails the efa transport audit in 06 instead of failing to schedule)
        use_gpu=for_settings(settings).job_defaults(settings).use_gpu,
        storage_path=storage_path(settings, run_name),
        warmup_steps=warmup_steps,
        cpu_threads=1,
        final_checkpoint=final_checkpoint,
    )


def worker_env(settings: Settings, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the driver and the training workers (runtime_env env_vars)."""
    env = {
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAY_TRAIN_V2_ENABLED": "1",
        "RAY_DEDUP_LOGS": "0",
    }
    if settings.nccl.debug:
        env["NCCL_DEBUG"] = settings.nccl.debug
    for k, v in for_settings(settings).job_defaults(settings).env.items():
        env.setdefault(k, v)
    env.update({k: str(v) for k, v in settings.nccl.env.items()})
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def stage_working_dir(settings: Settings, cfg: dict[str, Any]) -> Path:
    """A clean working_dir: this package's Python files and the job config (nothing else travels)."""
    d = run_dir(settings, cfg["run_name"]) / "job_src" / cfg["marker"]
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(PACKAGE_DIR, d / "raytrain_helpers", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (d / "job_config.json").write_text(json.dumps(cfg, indent=2))
    return d


def submit(
    settings: Settings,
    *,
    run_name: str | None = None,
    steps: int | None = None,
    extra_env: dict[str, str] | None = None,
    warmup_steps: int = 0,
    follow: bool = True,
    timeout_s: float = 3600,
    quiet: bool = False,
    progress: bool = True,
    final_checkpoint: bool = True,
) -> JobRun:
    """Submit (or attach to) the training job of ``run_name`` and follow it to the end."""
    run_name = run_name or settings.run_name
    with for_settings(settings).job_server(settings) as url:
        client = rayjobs.client(url)
        sid = rayjobs.find_active(client, run_name)
        cfg: dict[str, Any] = {}
        if sid:
            if not quiet:
                print(f"a job of run {run_name!r} is already running: following {sid}")
        else:
            cfg = job_config(
                settings, run_name=run_name, steps=steps, warmup_steps=warmup_steps, final_checkpoint=final_checkpoint
            )
            sid = _submit_new(settings, client, cfg, extra_env)
            if not quiet:
                print(f"submitted {sid} to {url}")
        if not follow:
            return JobRun(sid, rayjobs.status_of(client, sid), config=cfg, attached=not cfg)
        run = rayjobs.follow(client, sid, timeout_s=timeout_s, quiet=quiet, progress=progress, total=cfg.get("steps"))
        run.config, run.attached = cfg, not cfg
    _save(settings, run, run_name)
    return run


def _submit_new(settings: Settings, client, cfg: dict[str, Any], extra_env: dict[str, str] | None) -> str:
    runtime_env: dict[str, Any] = {
        "working_dir": str(stage_working_dir(settings, cfg)),
        "env_vars": worker_env(settings, extra_env),
    }
    if settings.train.extra_pip:
        runtime_env["pip"] = list(settings.train.extra_pip)
    sid = f"raytrain-{cfg['run_name']}-{cfg['marker']}"
    client.submit_job(
        entrypoint=f"python -m {ENTRYPOINT_MODULE} --config job_config.json",
        submission_id=sid,
        runtime_env=runtime_env,
        metadata={rayjobs.RUN_KEY: cfg["run_name"], "raytrain_marker": cfg["marker"]},
    )
    return sid


def _save(settings: Settings, run: JobRun, run_name: str) -> None:
    d = run_dir(settings, run_name)
    (d / "job.json").write_text(json.dumps(run.to_json(), indent=2, default=str))
    (d / "job.log").write_text(run.logs)


def load_last(settings: Settings, run_name: str | None = None) -> JobRun | None:
    """The last job of a run as 05_train recorded it (06_verify reads this)."""
    p = runs_dir(settings) / (run_name or settings.run_name) / "job.json"
    if not p.is_file():
        return None
    logs_p = p.parent / "job.log"
    return JobRun.from_json(json.loads(p.read_text()), logs=logs_p.read_text() if logs_p.exists() else "")


def live_status(settings: Settings, submission_id: str) -> str | None:
    """The job's status as the cluster reports it now (None when the cluster does not know it)."""
    try:
        with for_settings(settings).job_server(settings) as url:
            return rayjobs.status_of(rayjobs.client(url), submission_id)
    except Exception:  # noqa: BLE001 - cluster down or job unknown
        return None


def plot_loss(run: JobRun, ax=None):
    """The loss per step (mean over ranks)."""
    import matplotlib.pyplot as plt

    losses = run.metrics.get("losses") or [s["loss"] for s in run.steps]
    start = run.metrics.get("start_step", 0) or 0
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3))
    else:
        fig = ax.figure
    ax.plot(range(start + 1, start + 1 + len(losses)), losses, marker="o")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (mean over ranks)")
    ax.set_title(f"{run.submission_id}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
