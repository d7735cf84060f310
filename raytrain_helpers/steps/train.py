"""05 · Train: submit the FSDP job through the Ray Jobs API and follow it.

The same code path serves every target: stage a ``working_dir`` holding this package and a ``job_config.json``,
submit ``python -m raytrain_helpers.worker.entrypoint`` with ``JobSubmissionClient`` (to the address the target's
``job_server`` yields), stream the logs back with a progress bar, and parse the driver's ``RAYTRAIN_RESULT`` line.
Transport variables (NCCL_*, FI_*) and extra pip packages travel in ``runtime_env`` only.

Idempotent: if a job of the same run is still running it is followed, not submitted again; one that ended while
nothing followed it is read back and recorded; a run already trained to its last step is not submitted again (its
finished job is the result); when a run is submitted again after a failure, or with more steps, Ray Train resumes
from its latest checkpoint.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shlex
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..clients import rayjobs
from ..clients.rayjobs import JobRun
from ..core.constants import ENTRYPOINT_MODULE
from ..core.paths import PACKAGE_DIR, run_dir, runs_dir
from ..core.settings import Settings
from ..core.tables import format_table
from ..core.validation import ConfigError
from ..plan import perf
from ..plan.memory import model_config
from ..present.shown import Shown
from ..targets import for_settings
from ..worker import memory_lab
from ..worker.hub import ModelSourceError, resolve_model_dir
from ..worker.job_config import JobConfig, JobConfigError, TypedConfig
from ..worker.kernels import LIGER_HASHED
from ..worker.model import shard_model
from . import observe


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
    profile_step: int = 0,
) -> JobConfig:
    """The job's config that its driver and every worker read (``job_config.json``), built from the settings: an
    unknown key or a value of the wrong type is a :class:`ConfigError` naming the key, before anything is submitted."""
    t = settings.train
    shape = perf_plan(settings)
    check_model_source(settings)
    values = dict(
        run_name=run_name or settings.run_name,
        marker=marker or uuid.uuid4().hex[:12],
        model=model_config(settings),
        data=t.data,
        data_format=t.data_format,
        data_columns=dict(t.data_columns),
        prompt_template=t.prompt_template,
        eval_every=t.eval_every,
        export=t.export,
        export_path=export_path(settings, run_name),
        preset=t.model_preset,
        model_id=t.model_id or None,
        steps=steps or t.steps,
        seq_len=t.seq_len,
        batch_size=shape.batch_size,
        # "auto" stays auto: each worker decides from its own device (the plan assumed shape.kernels)
        kernels=t.kernels,
        planned_kernels=shape.kernels,
        peak_tflops=perf.peak_table(),
        learning_rate=learning_rate(settings),
        seed=t.seed,
        checkpoint_every=t.checkpoint_every,
        max_failures=t.max_failures,
        num_workers=t.num_workers,
        precision=t.precision,
        # aws: the driver decides from the cluster (GPU nodes -> NCCL; a CPU-only cluster -> gloo, which
        # then fails the efa transport audit in 06 instead of failing to schedule)
        use_gpu=for_settings(settings).job_defaults(settings).use_gpu,
        storage_path=storage_path(settings, run_name),
        warmup_steps=warmup_steps,
        cpu_threads=1,
        final_checkpoint=final_checkpoint,
        profile_step=profile_step,
    )
    try:  # checked as the job's driver will read it: a misspelt key or a value of the wrong type is named here
        return JobConfig.from_dict(values)
    except JobConfigError as e:
        raise ConfigError(str(e)) from None


def learning_rate(settings: Settings) -> float:
    """``train.learning_rate``, with 0 (auto) resolved: 2e-5 fine-tuning ``model_id``, 5e-3 for ``tiny`` from
    random weights (it learns the ``learnable`` data in 8 steps), 1e-4 for the other presets."""
    t = settings.train
    if t.learning_rate:
        return t.learning_rate
    if t.model_id:
        return 2e-5
    return 5e-3 if t.model_preset == "tiny" else 1e-4


def export_path(settings: Settings, run_name: str | None = None) -> str:
    """Where the job writes the trained model as a Hugging Face folder: ``runs/<run>/model``, or the S3 storage's
    ``<storage_path>/<run>/model``."""
    store = storage_path(settings, run_name)
    if store.startswith("s3://"):
        return f"{store.rstrip('/')}/{run_name or settings.run_name}/model"
    return str(run_dir(settings, run_name) / "model")


def check_model_source(settings: Settings) -> None:
    """Stop before submitting when the job could not find ``train.model_id``: a hub id while the workers may not
    download (``HF_HUB_OFFLINE=1`` in their environment, as on the local target) must already be in the cache."""
    model_id = settings.train.model_id
    if not model_id or worker_env(settings).get("HF_HUB_OFFLINE", "") not in ("1", "true", "True", "yes", "on"):
        return
    try:
        resolve_model_dir(model_id, download=False)
    except ModelSourceError as e:
        raise ConfigError(str(e)) from None


def perf_plan(settings: Settings):
    """The memory plan the job runs with: ``batch_size`` (``auto`` resolved) and ``kernels`` for the workers'
    GPUs (the local GPUs, or the aws GPU node type); CPU workers keep the settings' batch and no kernels."""
    return for_settings(settings).memory_plan(settings)


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
        # how often Ray Train's controller polls the workers (default 2 s): it notices the worker group up, each
        # checkpoint and the end of training that much sooner
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5",
    }
    if settings.nccl.debug:
        env["NCCL_DEBUG"] = settings.nccl.debug
    env.update(for_settings(settings).job_defaults(settings).env)  # the target knows its network (hub or not)
    env.update({k: str(v) for k, v in settings.nccl.env.items()})
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def stage_working_dir(settings: Settings, cfg: TypedConfig) -> Path:
    """A clean working_dir: this package's Python files and the job config (nothing else travels).

    ``cfg``: the training job's :class:`JobConfig` or another job's typed config (each has ``run_name`` and
    ``marker``). It is written only when it reads back from its JSON as itself: what the job reads is what was
    built here (a :class:`ConfigError` names the first value that would not; nothing is staged)."""
    try:
        text = cfg.to_json()
    except JobConfigError as e:
        raise ConfigError(str(e)) from None
    d = run_dir(settings, cfg.run_name) / "job_src" / cfg.marker
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(PACKAGE_DIR, d / "raytrain_helpers", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_data"))
    (d / "job_config.json").write_text(text)
    return d


def submit(
    settings: Settings,
    *,
    run_name: str | None = None,
    steps: int | None = None,
    extra_env: dict[str, str] | None = None,
    warmup_steps: int = 0,
    follow: bool = True,
    quiet: bool = False,
    progress: rayjobs.Progress | None = None,
    final_checkpoint: bool = True,
    metrics: str | None = "train",
    profile_step: int = 0,
) -> JobRun:
    """Submit (or attach to) the training job of ``run_name`` and follow it to the end.

    The learner sees the job's step lines (rank 0), each rank's throughput, checkpoints and errors, once each; the
    full log goes to ``runs/<run_name>/job.log``. ``progress``: an object with ``update(metrics: dict)``, called
    with each step's metrics (step, steps, loss, step_time_s, tokens_per_s, and eval_loss when the step has it)
    instead of printing the step line, and ``close()``, called once at the end; None prints plain step lines. The
    job is stopped after ``train.job_timeout_s`` seconds (0: never). Interrupting the call leaves the job running:
    calling it again follows the same job, or, once it has ended, records its results. A run already trained to
    ``steps`` is not submitted again: its finished job is returned (:func:`complete_run`), with ``already_complete``
    set. ``metrics``: while the job is followed, Ray's node metrics are recorded in ``runs/<run_name>/metrics/
    <metrics>.jsonl`` (:func:`.observe.recording`); None records none. ``profile_step``: that step runs under
    ``torch.profiler`` on every rank (``worker/step_trace.py``)."""
    run_name = run_name or settings.run_name
    if not hasattr(progress, "update"):  # a bare True/False from older callers: plain step lines
        progress = None
    with for_settings(settings).job_server(settings) as url, rayjobs.quiet_client_logs():
        client = rayjobs.client(url)
        sid = rayjobs.find_active(client, run_name)
        cfg: JobConfig | None = None
        if sid:
            if not quiet:
                print(f"a job of run {run_name!r} is already running: following {sid}")
        else:
            cfg = job_config(
                settings,
                run_name=run_name,
                steps=steps,
                warmup_steps=warmup_steps,
                final_checkpoint=final_checkpoint,
                profile_step=profile_step,
            )
            # without a final checkpoint a new job starts from the last periodic one and trains again
            done = complete_run(settings, client, run_name, cfg.steps, quiet=quiet) if final_checkpoint else None
            if done is not None:
                if progress is not None:
                    replay(done, progress)
                return done
            sid = _submit_new(settings, client, cfg, extra_env)
            if not quiet:
                print(f"submitted {sid} to {url}")
        if not follow:
            return JobRun(sid, rayjobs.status_of(client, sid), config=_as_record(cfg), attached=cfg is None)
        with observe.recording(settings, metrics, run_name=run_name) if metrics else contextlib.nullcontext():
            run = rayjobs.follow(
                client,
                sid,
                timeout_s=settings.train.job_timeout_s,
                quiet=quiet,
                progress=progress,
                log_path=run_dir(settings, run_name) / "job.log",
            )
        run.config = _as_record(cfg or _recorded_config(settings, run_name, sid))
        run.attached = cfg is None
    _save(settings, run, run_name)
    return run


def complete_run(settings: Settings, client, run_name: str, steps: int, *, quiet: bool = False) -> JobRun | None:
    """The run's finished job when nothing is left to train (its last step reached ``steps``), else None.

    A job of the run that ended successfully while nothing followed it (the notebook's kernel was interrupted or
    died; the job ran on in the cluster) is read back from the cluster and recorded first, as if followed. Then,
    when the recorded job succeeded and trained up to ``steps``, that job is the run's result: a job submitted now
    would resume from the last checkpoint and train nothing."""
    recorded = load_last(settings, run_name)
    latest = rayjobs.latest_of_run(client, run_name)
    if latest and latest[1] == "SUCCEEDED" and (recorded is None or recorded.submission_id != latest[0]):
        recorded = rayjobs.finished(client, latest[0])
        recorded.config = _as_record(_recorded_config(settings, run_name, latest[0]))
        recorded.attached = True
        _save(settings, recorded, run_name)
        if not quiet:
            print(f"job {latest[0]} of run {run_name!r} ended while nothing followed it: its results are recorded now")
    if recorded is None or not recorded.ok or int(recorded.metrics.get("step") or 0) < steps:
        return None
    recorded.already_complete = True
    if not quiet:
        print(already_complete_message(recorded, run_name, steps))
    return recorded


def already_complete_message(run: JobRun, run_name: str, steps: int) -> str:
    """What 05 says instead of submitting a job that would train nothing."""
    m = run.metrics
    asked = "" if int(m.get("step") or 0) == steps else f" ({steps} asked for)"
    return (
        f"run {run_name!r} is already complete: job {run.submission_id} trained it to step {m.get('step')}{asked}, "
        f"so nothing was submitted (a new job would resume from its last checkpoint and train nothing). "
        f"The results below are that job's.\n"
        f"To train again: a new run name (-p run_name {run_name}-2, or run_name = ... in the parameters cell) "
        f"starts from step 0; more steps (-p steps {int(m.get('step') or steps) + 40}) continue this run from its "
        f"checkpoint."
    )


def replay(run: JobRun, progress: rayjobs.Progress) -> None:
    """Draw a finished job's recorded steps in the live view (the loss curve it trained), then close it."""
    by_step = {int(m["step"]): m for m in run.steps}  # Ray may print a line twice
    for step in sorted(by_step):
        progress.update(by_step[step])
    progress.close()


def _recorded_config(settings: Settings, run_name: str, sid: str) -> JobConfig | None:
    """The job config staged for the job ``sid`` (a job attached to after the kernel that submitted it died); one
    staged by an earlier version of this package reads too (:meth:`JobConfig.from_record`); None: none readable."""
    marker = sid.rsplit("-", 1)[-1]
    p = run_dir(settings, run_name) / "job_src" / marker / "job_config.json"
    try:
        return JobConfig.from_record(json.loads(p.read_text()))
    except (OSError, ValueError):
        return None


def _as_record(cfg: JobConfig | None) -> dict[str, Any]:
    """The config as :class:`JobRun` records it (its JSON object; empty when not known)."""
    return cfg.to_dict() if cfg else {}


def job_pip(settings: Settings, cfg: JobConfig) -> list[str]:
    """The job's ``runtime_env`` pip list: ``train.extra_pip``, plus the pinned liger-kernel when the workers may
    use it (``kernels`` liger, or auto planned as liger) and do not have it already (the DLC has none; a local
    cluster runs this environment, which may)."""
    pip = list(settings.train.extra_pip)
    wants_liger = "liger" in (cfg.kernels, cfg.planned_kernels)
    if wants_liger and not any(p.startswith("liger-kernel") for p in pip):
        here = for_settings(settings).WORKERS_USE_THIS_ENVIRONMENT
        if not here or importlib.util.find_spec("liger_kernel") is None:
            pip.append(LIGER_HASHED)  # the workers get liger-kernel through the runtime_env, not an image
    return pip


#: pip's options for a hash-pinned install (Ray 2.58's runtime_env ``pip.pip_install_options``, which replace
#: Ray's defaults, kept here): every file checked against its hash, no dependency fetched unchecked.
HASHED_PIP_OPTIONS = ["--require-hashes", "--no-deps", "--disable-pip-version-check", "--no-cache-dir"]


def runtime_pip(pip: list[str]) -> list[str] | dict[str, Any]:
    """The runtime_env ``pip`` field for these requirement lines: the plain list, or, when one is hash-pinned
    (``--hash=``), Ray's dict form (``packages`` written to a requirements file for ``pip install -r``) in pip's
    hash-checking mode, where every line must carry its hash: one that does not is refused here."""
    if not any("--hash=" in line for line in pip):
        return pip
    bare = [line for line in pip if "--hash=" not in line]
    if bare:
        raise ConfigError(
            f"train.extra_pip = {bare!r} has no --hash, and the job's liger-kernel is installed hash-checked (pip "
            "then checks every line). Fix: pin each as 'NAME==VERSION --hash=sha256:HEX' (with its dependencies), "
            "or kernels: none"
        )
    return {"packages": pip, "pip_check": False, "pip_install_options": list(HASHED_PIP_OPTIONS)}


def _submit_new(settings: Settings, client, cfg: JobConfig, extra_env: dict[str, str] | None) -> str:
    runtime_env: dict[str, Any] = {
        "working_dir": str(stage_working_dir(settings, cfg)),
        "env_vars": worker_env(settings, extra_env),
    }
    pip = job_pip(settings, cfg)
    if pip:
        runtime_env["pip"] = runtime_pip(pip)
    sid = f"raytrain-{cfg.run_name}-{cfg.marker}"
    # the cluster's own interpreter, never whichever `python` comes first on the raylets' PATH
    python = shlex.quote(for_settings(settings).job_defaults(settings).python)
    client.submit_job(
        entrypoint=f"{python} -m {ENTRYPOINT_MODULE} --config job_config.json",
        submission_id=sid,
        runtime_env=runtime_env,
        metadata={rayjobs.RUN_KEY: cfg.run_name, "raytrain_marker": cfg.marker},
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


def live_status(settings: Settings, submission_id: str) -> str:
    """The job's status as the cluster reports it now (``SUCCEEDED``, ``RUNNING``...).

    Raises :class:`~raytrain_helpers.clients.rayjobs.JobStatusError` saying why the cluster cannot tell: its Jobs
    API is unreachable (cluster stopped, port-forward refused); its subclass ``JobUnknownError`` when the cluster
    answers but does not know the job (a cluster started since)."""
    try:
        with for_settings(settings).job_server(settings) as url:
            return rayjobs.status_of(rayjobs.client(url), submission_id)
    except (OSError, RuntimeError) as e:  # ConnectionError, the target's "not running", Ray's "does not exist"
        # Ray's Jobs API answers 404 "Job ... does not exist" for a job it never ran
        error = rayjobs.JobUnknownError if "does not exist" in str(e) else rayjobs.JobStatusError
        raise error(f"cannot read the status of {submission_id}: {type(e).__name__}: {e}") from e


def plot_loss(run: JobRun, ax=None):
    """The train loss per step and the held-out eval loss (means over ranks), titled with the run and its data."""
    import matplotlib.pyplot as plt

    losses = run.metrics.get("losses") or [s["loss"] for s in run.steps]
    start = run.metrics.get("start_step", 0) or 0
    evals = run.metrics.get("evals") or sorted({(s["step"], s["eval_loss"]) for s in run.steps if "eval_loss" in s})
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3))
    else:
        fig = ax.figure
    ax.plot(range(start + 1, start + 1 + len(losses)), losses, marker="o", label="train")
    if evals:
        ax.plot([e[0] for e in evals], [e[1] for e in evals], marker="s", linestyle="--", label="eval (held out)")
        ax.legend()
    ax.set_xlabel("step")
    cfg = run.job_config
    run_name = (cfg.run_name if cfg else None) or run.result.get("run_name") or ""
    data = run.metrics.get("data") or (cfg.data if cfg else None) or "random"
    ax.set_ylabel("cross-entropy per token\n(mean over ranks)")
    what = "training loss, random tokens: nothing to learn" if data == "random" else "training loss of the fine-tune"
    ax.set_title(f"run {run_name}: {what} ({Path(str(data)).name} data)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


_JOB_PEAKS: dict[tuple, dict[str, int]] = {}


def compare_memory(variants: dict[str, Any] | None = None, **sizes: int) -> Shown:
    """05's exercises: the peak memory of one training step on this machine's CPU, for each sharding function in
    ``variants`` (name -> ``shard(model, mixed_precision=...)``), beside the job's own ``shard_model``; by kind
    (full weights, activations, gradients, optimizer state...), in MiB. ``sizes``: ``batch_size`` or ``seq_len``
    for :func:`~raytrain_helpers.worker.memory_lab.measure`."""
    key = tuple(sorted(sizes.items()))
    if key not in _JOB_PEAKS:  # the job's own sharding, measured once per size in this process
        _JOB_PEAKS[key] = memory_lab.measure(shard_model, **sizes)
    peaks = {"the job's shard_model": _JOB_PEAKS[key]}
    peaks.update({name: memory_lab.measure(shard, **sizes) for name, shard in (variants or {}).items()})
    kinds = [k for k in memory_lab.KINDS.values() if any(p[k] for p in peaks.values())]
    base = next(iter(peaks.values()))["total"]
    rows = [[k, *(f"{p[k] / 2**20:.1f}" for p in peaks.values())] for k in kinds]
    rows.append(["peak (all kinds)", *(f"{p['total'] / 2**20:.1f}" for p in peaks.values())])
    rows.append(["vs the job's", *(f"{p['total'] / base:.0%}" for p in peaks.values())])
    text = format_table(rows, ["MiB at the step's peak", *peaks], max_width=30)
    return Shown("one training step on one CPU rank: what is in memory at its peak\n" + text)
