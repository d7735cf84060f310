"""Step 05: submit the FSDP job through the Ray Jobs API and follow it.

The same code path serves both targets: stage a ``working_dir`` holding this package and a
``job_config.json``, submit ``python -m raytrain_helpers.entrypoint`` with ``JobSubmissionClient``
(local: the head's dashboard on 127.0.0.1; aws: a port-forward to the head pod), stream the logs back
with a progress bar, and parse the driver's ``RAYTRAIN_RESULT`` line. Transport variables (NCCL_*,
FI_*) and extra pip packages travel in ``runtime_env`` only.

Idempotent: if a job of the same run is still running it is followed, not submitted again; when a run
is submitted again after a failure, Ray Train resumes from its latest checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .config import Settings

PKG_DIR = Path(__file__).resolve().parent
RESULT_PREFIX = "RAYTRAIN_RESULT "
STEP_RE = re.compile(r"\[train\] step (\d+)/(\d+) loss=([-\d.eEnaif+]+) step_time=([\d.]+)s tokens/s=(\d+)")
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def runs_dir(settings: Settings) -> Path:
    env_file = settings.__dict__.get("_env_file")
    base = Path(env_file).parent if env_file else Path.cwd()
    return Path(os.environ.get("RAYTRAIN_RUNS_DIR", base / "runs")).resolve()


def run_dir(settings: Settings, run_name: str | None = None) -> Path:
    d = runs_dir(settings) / (run_name or settings.run_name)
    d.mkdir(parents=True, exist_ok=True)
    return d


def storage_path(settings: Settings, run_name: str | None = None) -> str:
    if settings.train.storage_path:
        return settings.train.storage_path
    if settings.target == "aws":
        from .config import ConfigError
        raise ConfigError("train.storage_path is empty but the aws target needs storage every worker pod can "
                          "reach for checkpoints. Fix: storage_path: s3://YOUR-BUCKET/raytrain")
    return str(run_dir(settings, run_name) / "storage")


def _use_gpu(settings: Settings) -> bool:
    if settings.target == "aws":
        return True
    from .capacity import resolve_local_gpus
    return resolve_local_gpus(settings) > 0


def job_config(settings: Settings, *, run_name: str | None = None, marker: str | None = None,
               steps: int | None = None, warmup_steps: int = 0, final_checkpoint: bool = True) -> dict[str, Any]:
    t = settings.train
    return dict(
        run_name=run_name or settings.run_name, marker=marker or uuid.uuid4().hex[:12],
        model=settings.model_config_dict(), preset=t.model_preset, model_id=t.model_id or None,
        steps=steps or t.steps, seq_len=t.seq_len, batch_size=t.batch_size, learning_rate=t.learning_rate,
        seed=t.seed, checkpoint_every=t.checkpoint_every, num_workers=t.num_workers, precision=t.precision,
        # aws: the driver decides from the cluster (GPU nodes -> NCCL; a CPU-only cluster -> gloo, which
        # then fails the efa transport audit in 06 instead of failing to schedule)
        use_gpu="auto" if settings.target == "aws" else _use_gpu(settings), storage_path=storage_path(settings, run_name), warmup_steps=warmup_steps,
        cpu_threads=1, final_checkpoint=final_checkpoint,
    )


def worker_env(settings: Settings, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the driver and the training workers (runtime_env env_vars)."""
    env = {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAY_TRAIN_V2_ENABLED": "1",
           "RAY_DEDUP_LOGS": "0"}
    if settings.nccl.debug:
        env["NCCL_DEBUG"] = settings.nccl.debug
    if _use_gpu(settings) and settings.target == "local":
        env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.update({k: str(v) for k, v in settings.nccl.env.items()})
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def stage_working_dir(settings: Settings, cfg: dict[str, Any]) -> Path:
    """A clean working_dir: this package's Python files and the job config (nothing else travels)."""
    d = run_dir(settings, cfg["run_name"]) / "job_src" / cfg["marker"]
    if d.exists():
        shutil.rmtree(d)
    pkg = d / "raytrain_helpers"
    shutil.copytree(PKG_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (d / "job_config.json").write_text(json.dumps(cfg, indent=2))
    return d


@dataclass
class JobRun:
    submission_id: str
    status: str
    logs: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, float]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    attached: bool = False
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "SUCCEEDED" and bool(self.result.get("ok"))

    @property
    def metrics(self) -> dict[str, Any]:
        m = self.result.get("metrics", {}) or {}
        if "ranks" not in m:  # no final checkpoint: rank 0 printed the summary into the logs
            m = dict(m, **parse_summary(self.logs))
        return m

    @property
    def ranks(self) -> list[dict[str, Any]]:
        return self.metrics.get("ranks", []) or []

    def show(self) -> None:
        from .report import table
        m = self.metrics
        print(f"job {self.submission_id}: {self.status}" + (" (attached to a running job)" if self.attached else ""))
        if self.result.get("error"):
            print(f"  error: {self.result['error']}")
        if m:
            start = m.get("start_step", 0)
            print(f"  steps {start}->{m.get('step')} of {m.get('steps')}, world size {m.get('world_size')}, "
                  f"final loss {m.get('loss', float('nan')):.4f}"
                  + (f", resumed from step {m['resumed_from']}" if m.get("resumed_from") else ""))
        if self.ranks:
            table([(r["rank"], r["node_id"][:12], r["device"], f"{r['tokens_per_s']:.1f}",
                    f"{r['peak_mem_bytes'] / 2**20:.0f} MiB") for r in self.ranks],
                  ["rank", "node", "device", "tokens/s", "peak memory"])

    def to_json(self) -> dict[str, Any]:
        return dict(submission_id=self.submission_id, status=self.status, result=self.result, steps=self.steps,
                    config=self.config, attached=self.attached, wall_s=self.wall_s)


def parse_result(logs: str) -> dict[str, Any]:
    for line in reversed(logs.splitlines()):
        i = line.find(RESULT_PREFIX)
        if i >= 0:
            try:
                return json.loads(line[i + len(RESULT_PREFIX):])
            except ValueError:
                continue
    return {}


def parse_summary(logs: str) -> dict[str, Any]:
    from .train import SUMMARY_PREFIX
    for line in reversed(logs.splitlines()):
        i = line.find(SUMMARY_PREFIX)
        if i >= 0:
            try:
                return json.loads(line[i + len(SUMMARY_PREFIX):])
            except ValueError:
                continue
    return {}


def parse_steps(logs: str) -> list[dict[str, float]]:
    out = []
    for m in STEP_RE.finditer(logs):
        out.append(dict(step=int(m.group(1)), steps=int(m.group(2)), loss=float(m.group(3)),
                        step_time_s=float(m.group(4)), tokens_per_s=float(m.group(5))))
    return out


@contextlib.contextmanager
def job_server(settings: Settings) -> Iterator[str]:
    """The Jobs API address: the local head's dashboard, or a port-forward to the head pod on aws."""
    if settings.target == "local":
        from .targets import local
        info = local.status(settings)
        if not info.running:
            raise RuntimeError("the local Ray cluster is not running. Fix: run 02_cluster "
                               "(or `raytrain-tutorial up`) first")
        yield info.dashboard_url
    else:
        from . import kuberay
        with kuberay.job_server(settings) as url:
            yield url


def _client(url: str):
    from ray.job_submission import JobSubmissionClient
    from .targets.local import _auth_headers
    return JobSubmissionClient(url, headers=_auth_headers() or None)


def find_active(client, run_name: str) -> str | None:
    """A job of this run that is still pending or running (so a re-run attaches to it)."""
    for j in client.list_jobs():
        md = j.metadata or {}
        if md.get("raytrain_run") == run_name and str(j.status) in ("PENDING", "RUNNING"):
            return j.submission_id
    return None


def submit(settings: Settings, *, run_name: str | None = None, steps: int | None = None,
           extra_env: dict[str, str] | None = None, warmup_steps: int = 0, follow: bool = True,
           timeout_s: float = 3600, quiet: bool = False, progress: bool = True,
           final_checkpoint: bool = True) -> JobRun:
    """Submit (or attach to) the training job of ``run_name`` and follow it to the end."""
    run_name = run_name or settings.run_name
    with job_server(settings) as url:
        client = _client(url)
        active = find_active(client, run_name)
        if active:
            sid, attached = active, True
            cfg = {}
            if not quiet:
                print(f"a job of run {run_name!r} is already running: following {sid}")
        else:
            cfg = job_config(settings, run_name=run_name, steps=steps, warmup_steps=warmup_steps,
                             final_checkpoint=final_checkpoint)
            wd = stage_working_dir(settings, cfg)
            runtime_env: dict[str, Any] = {"working_dir": str(wd), "env_vars": worker_env(settings, extra_env)}
            if settings.train.extra_pip:
                runtime_env["pip"] = list(settings.train.extra_pip)
            sid = f"raytrain-{run_name}-{cfg['marker']}"
            client.submit_job(entrypoint="python -m raytrain_helpers.entrypoint --config job_config.json",
                              submission_id=sid, runtime_env=runtime_env,
                              metadata={"raytrain_run": run_name, "raytrain_marker": cfg["marker"]})
            attached = False
            if not quiet:
                print(f"submitted {sid} to {url}")
        if not follow:
            return JobRun(sid, str(client.get_job_status(sid)), config=cfg, attached=attached)
        run = _follow(client, sid, timeout_s=timeout_s, quiet=quiet, progress=progress,
                      total=(cfg.get("steps") if cfg else None))
        run.config, run.attached = cfg, attached
    _save(settings, run, run_name)
    return run


def _follow(client, sid: str, *, timeout_s: float, quiet: bool, progress: bool, total: int | None) -> JobRun:
    from tqdm import tqdm

    t0 = time.time()
    seen = 0
    bar = tqdm(total=total, desc="train steps", unit="step", file=sys.stderr,
               disable=not progress, dynamic_ncols=False, ncols=90) if progress else None
    last_step = 0
    logs = ""
    status = "PENDING"
    try:
        while True:
            status = str(client.get_job_status(sid)).split(".")[-1]
            logs = client.get_job_logs(sid)
            new = logs[seen:]
            seen = len(logs)
            if new and not quiet:
                sys.stdout.write(new if new.endswith("\n") else new + "\n")
                sys.stdout.flush()
            if bar is not None:
                for s in parse_steps(new):
                    if bar.total is None:
                        bar.total = s["steps"]
                    bar.update(max(0, s["step"] - max(last_step, bar.n)))
                    last_step = s["step"]
                    bar.set_postfix(loss=f"{s['loss']:.3f}")
            if status in TERMINAL:
                break
            if time.time() - t0 > timeout_s:
                client.stop_job(sid)
                status = "STOPPED"
                break
            time.sleep(1.0)
    finally:
        if bar is not None:
            bar.close()
    return JobRun(sid, status, logs=logs, result=parse_result(logs), steps=parse_steps(logs),
                  wall_s=time.time() - t0)


def _save(settings: Settings, run: JobRun, run_name: str) -> None:
    d = run_dir(settings, run_name)
    (d / "job.json").write_text(json.dumps(run.to_json(), indent=2, default=str))
    (d / "job.log").write_text(run.logs)


def load_last(settings: Settings, run_name: str | None = None) -> JobRun | None:
    """The last job of a run as 05_train recorded it (06_verify reads this)."""
    p = runs_dir(settings) / (run_name or settings.run_name) / "job.json"
    if not p.is_file():
        return None
    d = json.loads(p.read_text())
    logs_p = p.parent / "job.log"
    return JobRun(d["submission_id"], d["status"], logs=logs_p.read_text() if logs_p.exists() else "",
                  result=d.get("result", {}), steps=d.get("steps", []), config=d.get("config", {}),
                  attached=d.get("attached", False), wall_s=d.get("wall_s", 0.0))


def live_status(settings: Settings, submission_id: str) -> str | None:
    """The job's status as the cluster reports it now (None when the cluster does not know it)."""
    try:
        with job_server(settings) as url:
            return str(_client(url).get_job_status(submission_id)).split(".")[-1]
    except Exception:  # noqa: BLE001 - cluster down or job unknown
        return None


def plot_loss(run: JobRun, ax=None):
    import matplotlib
    matplotlib.use(matplotlib.get_backend())
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


# --------------------------------------------------------------------------------------------
# 07_benchmark: the same job, changing only the transport environment
# --------------------------------------------------------------------------------------------

def default_variants(settings: Settings) -> list[dict[str, Any]]:
    """(label, expected transport, env) pairs to compare on this target."""
    if settings.target == "aws":
        return [dict(label="efa", expect="efa", env={"FI_PROVIDER": "efa", "NCCL_NET_PLUGIN": "ofi"}),
                dict(label="socket", expect="socket", env={"NCCL_NET": "Socket"})]
    if _use_gpu(settings):
        return [dict(label="p2p", expect="p2p", env={}),
                dict(label="socket", expect="socket", env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})]
    return [dict(label="gloo", expect="none", env={})]


@dataclass
class BenchRun:
    label: str
    expect: str
    env: dict[str, str]
    job: JobRun
    log_text: str = ""
    audit: Any = None

    @property
    def timed_step_s(self) -> float:
        ranks = self.job.ranks
        return max(r["mean_step_time_s"] for r in ranks) if ranks else float("nan")

    @property
    def steps_per_s(self) -> float:
        return 1.0 / self.timed_step_s if self.timed_step_s == self.timed_step_s and self.timed_step_s else 0.0

    @property
    def tokens_per_s_per_gpu(self) -> float:
        ranks = self.job.ranks
        return sum(r["tokens_per_s"] for r in ranks) / len(ranks) if ranks else 0.0

    def as_compare_input(self) -> dict[str, Any]:
        return dict(label=self.label, expected_transport=self.expect, log_text=self.log_text,
                    tokens_per_s_per_gpu=self.tokens_per_s_per_gpu, steps_per_s=self.steps_per_s)


def benchmark(settings: Settings, variants: list[dict[str, Any]] | None = None, *, quiet: bool = True) -> list[BenchRun]:
    """Run the job once per variant (bench_steps, the first bench_warmup_steps discarded)."""
    from .config import with_overrides
    from .report import collect_worker_logs

    variants = variants or default_variants(settings)
    t = settings.train
    bench_settings = with_overrides(settings, checkpoint_every=0)
    out = []
    for v in variants:
        name = f"{settings.run_name}-bench-{v['label']}-{uuid.uuid4().hex[:6]}"
        job = submit(bench_settings, run_name=name, steps=t.bench_steps, warmup_steps=t.bench_warmup_steps,
                     extra_env=v["env"], quiet=quiet, progress=not quiet, final_checkpoint=False)
        logs = collect_worker_logs(settings, job)
        out.append(BenchRun(v["label"], v["expect"], v["env"], job, log_text="\n".join(logs.values())))
    return out


def plot_benchmark(runs: list[BenchRun], ax=None):
    import matplotlib.pyplot as plt
    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 3))
    else:
        fig = ax.figure
    labels = [r.label for r in runs]
    vals = [r.tokens_per_s_per_gpu for r in runs]
    ax.bar(labels, vals, color=["tab:green", "tab:red", "tab:blue"][: len(runs)])
    ax.set_ylabel("tokens/s per worker (warm)")
    ax.set_title("same job, transport changed only")
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom")
    fig.tight_layout()
    return fig
