"""05 and 07's pictures, drawn from the learner's own run and cluster and saved into the run's folder.

:func:`profile` runs a short job of the run's model on the learner's target (a run of its own,
``<run_name>-profile``: random tokens, no checkpoint, no evaluation, no export) whose last step runs under
``torch.profiler`` on every rank; :func:`fsdp_step` draws that step per layer, :func:`cluster` the nodes and
ranks of any finished job, :func:`memory_step` memory through one step on this machine (05's memory lab),
:func:`loss` a run's losses labelled as what they measure. Each writes ``runs/<run>/<name>.png`` and returns
a :class:`~raytrain_helpers.present.pictures.Picture` (a notebook shows the PNG; ``.figure`` is the Figure).
"""

from __future__ import annotations

import math

from ..clients.rayjobs import JobRun
from ..core.loading import with_overrides
from ..core.paths import run_dir
from ..core.settings import Settings
from ..plan.step_trace import rank_traces
from ..present import pictures
from ..worker import memory_lab
from ..worker.model import shard_model
from .train import submit

#: The profiled job's steps: the first warms up (buffers allocated, caches filled), the last is recorded.
PROFILE_STEPS = 2


def profile(settings: Settings, *, quiet: bool = True) -> JobRun:
    """One profiled step of the run's model on the target's cluster (a job of its own, ``<run_name>-profile``)."""
    quick = with_overrides(settings, checkpoint_every=0, data="random", eval_every=0, export=False)
    return submit(
        quick,
        run_name=f"{settings.run_name}-profile",
        steps=PROFILE_STEPS,
        quiet=quiet,
        final_checkpoint=False,
        profile_step=PROFILE_STEPS,
    )


def fsdp_step(settings: Settings, job: JobRun) -> pictures.Picture:
    """The profiled step of ``job`` (:func:`profile`) per rank and layer; saved as ``fsdp_step.png``."""
    if not job.ok:
        raise RuntimeError(f"the profiled job did not finish ({job.status}): see runs/{_run(settings, job)}/job.log")
    traces = rank_traces(job.metrics.get("ranks"))
    backend = "NCCL" if any(r.get("gpu") not in (None, "cpu") for r in job.ranks) else "gloo"
    fig = pictures.fsdp_step(traces, title=f"one FSDP step per layer, {len(traces)} ranks on {backend}")
    return pictures.Picture(fig, pictures.save_png(fig, run_dir(settings, _run(settings, job)), "fsdp_step"))


def cluster(settings: Settings, job: JobRun) -> pictures.Picture:
    """The nodes ``job`` ran on and which rank ran where; saved as ``cluster.png``."""
    fig = pictures.cluster(job.result.get("nodes") or [], job.ranks)
    return pictures.Picture(fig, pictures.save_png(fig, run_dir(settings, _run(settings, job)), "cluster"))


def memory_step(settings: Settings, **sizes: int) -> pictures.Picture:
    """Memory through one step of 05's memory lab (the job's ``shard_model``, this machine's CPU); saved as
    ``memory_step.png`` in the run's folder. ``sizes``: ``batch_size`` or ``seq_len``."""
    fig = pictures.memory_step(memory_lab.timeline(shard_model, **sizes))
    return pictures.Picture(fig, pictures.save_png(fig, run_dir(settings), "memory_step"))


def loss(
    settings: Settings, jobs: dict[str, JobRun], *, measures: str, title: str, name: str = "loss"
) -> pictures.Picture:
    """The train loss per step (mean over ranks) of each job in ``jobs`` (label -> job), the y axis saying what it
    ``measures``, and ln V (the loss of guessing uniformly over the model's vocabulary) dashed; saved as
    ``<name>.png`` in the run's folder."""
    series = {}
    for label, job in jobs.items():
        losses = job.metrics.get("losses") or [s["loss"] for s in job.steps]
        start = int(job.metrics.get("start_step") or 0)
        series[label] = [(start + 1 + i, float(v)) for i, v in enumerate(losses)]
    cfgs = [job.job_config for job in jobs.values() if job.job_config is not None]
    vocab = int(cfgs[0].model.get("vocab_size") or 0) if cfgs else 0
    floor = (math.log(vocab), f"ln {vocab} = {math.log(vocab):.2f}: guessing uniformly") if vocab else None
    fig = pictures.loss_curve(series, measures=measures, title=title, reference=floor)
    return pictures.Picture(fig, pictures.save_png(fig, run_dir(settings), name))


def _run(settings: Settings, job: JobRun) -> str:
    return str(job.result.get("run_name") or (job.job_config.run_name if job.job_config else settings.run_name))
