"""Shared by the GPU benchmarks: the job's config, a torchrun run of its loop, a Ray Train run through 05's path,
and the figures each run is judged by (tokens/s per GPU, MFU, peak memory against the plan, the prediction)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import raytrain_helpers as rt
from raytrain_helpers.core.config import with_overrides
from raytrain_helpers.plan import memory, perf
from raytrain_helpers.steps import train
from raytrain_helpers.worker.job_config import JobConfig

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GIB = 1024**3
TORCHRUN_TIMEOUT_S = 240


def gpu_facts() -> list[dict[str, Any]]:
    import torch

    props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
    return [dict(name=p.name, mem_gib=p.total_memory / GIB) for p in props]


def settings(**params):
    """qwen2.5-1.5b, seq 2048, batch auto, random tokens, one worker raylet per GPU (the gpu-evidence shape)."""
    n = len(gpu_facts())
    base = dict(
        model_preset="qwen2.5-1.5b",
        seq_len=2048,
        batch_size="auto",
        steps=12,
        checkpoint_every=0,
        bench_steps=12,
        bench_warmup_steps=3,
        worker_nodes=max(n, 1),
        run_name="perf",
        data="random",  # torchrun has no Ray Data: uniform tokens, generated in the loop (Ray: through Ray Data)
        eval_every=0,
        export=False,
    )
    base.update(params)
    return rt.load(**base)


def torchrun(s, label: str, out: Path, *, steps: int, warmup: int, env: dict[str, str] | None = None) -> dict:
    """The loop under torchrun on every GPU; returns the run's record (or its error)."""
    cfg = train.job_config(s, run_name=f"{label}-{uuid.uuid4().hex[:6]}", steps=steps, warmup_steps=warmup)
    cfg_path = out / f"{label}.config.json"
    cfg_path.write_text(cfg.to_json())
    summary = out / f"{label}.summary.json"
    n = len(gpu_facts())
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
        str(HERE / "torchrun_loop.py"), "--config", str(cfg_path), "--out", str(summary),
    ]  # fmt: skip
    full_env = dict(os.environ, **train.worker_env(s), **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    full_env["NCCL_DEBUG"] = "WARN"
    t = time.time()
    rec = dict(label=label, runner="torchrun", command=" ".join(cmd))
    try:
        proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=TORCHRUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        return dict(rec, ok=False, error=f"still running after {TORCHRUN_TIMEOUT_S} s: {str(e.stderr)[-2000:]}")
    (out / f"{label}.log").write_text(proc.stdout + proc.stderr)
    rec["wall_s"] = round(time.time() - t, 1)
    if proc.returncode or not summary.exists():
        return dict(rec, ok=False, error=(proc.stderr or proc.stdout)[-3000:])
    return dict(rec, ok=True, **figures(s, cfg, json.loads(summary.read_text())))


def ray_train(s, label: str, *, steps: int, warmup: int, env: dict[str, str] | None = None, timeout_s=0) -> dict:
    """05's path: the Ray Jobs API -> entrypoint -> TorchTrainer, on the local cluster (which must be up)."""
    t = time.time()
    over = {"job_timeout_s": timeout_s} if timeout_s and "job_timeout_s" in type(s.train).model_fields else {}
    run = train.submit(
        with_overrides(s, checkpoint_every=0, **over),
        run_name=f"{s.run_name}-{label}-{uuid.uuid4().hex[:6]}",
        steps=steps,
        warmup_steps=warmup,
        extra_env=env,
        quiet=False,  # the job's log streams to stdout while it runs
        progress=False,
        final_checkpoint=False,
    )
    rec = dict(label=label, runner="ray-train (Ray Jobs API, 05's path)", wall_s=round(time.time() - t, 1))
    if not run.ok:
        return dict(rec, ok=False, error=run.logs[-3000:])
    return dict(rec, ok=True, **figures(s, run.job_config, run.metrics))


def figures(s, cfg: JobConfig, summary: dict) -> dict:
    """Tokens/s per GPU (mean of the ranks, after warm-up), MFU, peak memory vs the plan, the prediction."""
    ranks = summary["ranks"]
    world = len(ranks)
    tps = sum(r["tokens_per_s"] for r in ranks) / world
    peak = max(r["peak_mem_bytes"] for r in ranks) / GIB
    model_cfg = cfg.model
    plan = memory.memory_plan(
        model_cfg,
        world_size=world,
        batch_size=cfg.batch_size,
        seq_len=cfg.seq_len,
        on_gpu=True,
        kernels=ranks[0].get("kernels", "none"),
    )
    gpu = perf.gpu_model(gpu_facts()[0]["name"]) or "H200"
    transport = "socket" if (os.environ.get("NCCL_P2P_DISABLE") or "") == "1" else "p2p"
    pred = perf.predict(
        model_cfg,
        gpu=gpu,
        world_size=world,
        batch_size=cfg.batch_size,
        seq_len=cfg.seq_len,
        kernels=ranks[0].get("kernels", "none"),
        transport=transport,
    )
    return dict(
        world_size=world,
        batch_size=cfg.batch_size,
        seq_len=cfg.seq_len,
        kernels=ranks[0].get("kernels"),
        tokens_per_s_per_gpu=tps,
        mfu=perf.mfu(model_cfg, cfg.seq_len, tps, perf.PEAK_BF16_TFLOPS[gpu][0]),
        mfu_reported_by_job=[r.get("mfu") for r in ranks],
        peak_gib=peak,
        planned_peak_gib=plan.peak_per_device_gib,
        plan_error=(plan.peak_per_device_gib - peak) / peak,
        predicted_tokens_per_s_per_gpu=pred.tokens_per_s_per_gpu,
        prediction_error=(pred.tokens_per_s_per_gpu - tps) / tps,
        losses=summary.get("losses"),
        step_times=summary.get("step_times"),
        gpu=gpu_facts()[0]["name"],
    )
