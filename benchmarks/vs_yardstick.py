"""The job through Ray Train (05's path) against the yardstick: one call, the same GPUs, the same batch.

    python benchmarks/vs_yardstick.py --out DIR [--probe PATH/fsdp_probe.py] [--commit SHA] [--old-tree DIR]
        [--skip torchrun]

On every GPU of this host, in this order:
1. the yardstick (``--probe``, by default ``benchmarks/yardstick/fsdp_probe.py``, with ``--liger``, unchanged) at
   the job's batch; then the same probe with its RMSNorm weights initialised to ones (``step_trace.norms_ones``),
   the figure a model with live activations reaches. The yardstick has initialised them itself since 2026-12-05, so
   the two agree; they parted for its earlier version, which trained zeros (``docs/performance.md``);
2. the job's loop under torchrun on random tokens (``benchmarks/torchrun_loop.py``), and, with ``--old-tree``, the
   same loop from another checkout of the package (its loss curve beside this one's: same seed, same tokens);
3. the job through 05's path: the local cluster (one worker raylet per GPU), the Ray Jobs API, the entrypoint,
   TorchTrainer; qwen2.5-1.5b, seq 2048, batch auto, kernels auto, ``learnable`` data.

Writes DIR/vs-yardstick.json (``gpu``, ``world_size``, ``batch``, ``tokens_per_s_per_gpu`` of the Ray Train run,
``yardstick_tokens_per_s_per_gpu`` of the same call, ``mfu``, ``step_s``, ``peak_memory_gib``, ``commit``, the
ratios and every run's record) and prints it; the file is rewritten after every run, so a call cut short keeps
what it measured. ``--skip torchrun`` leaves out step 2 (the shortest call that still gives the table's figures).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import gpu_runs
import step_trace

from raytrain_helpers.core.config import with_overrides
from raytrain_helpers.steps import train
from raytrain_helpers.targets import local

#: The job through Ray Train may be at most this much slower than the yardstick at the same batch.
TARGET = 0.03


def probe_runs(args, batch: int, out: Path) -> dict:
    """The yardstick as published and with initialised norms, then the job's loop under torchrun; the record is
    rewritten after each."""
    ns = SimpleNamespace(out=str(out), probe=args.probe, batch=batch, steps=args.steps, prof_at=0)
    step_trace.job_config(out, batch, args.steps)
    planned = [("yardstick", "yardstick", "", {}), ("yardstick-norms_ones", "yardstick", "norms_ones", {})]
    if "torchrun" not in args.skip:
        planned.append(("torchrun", "job", "", {}))
        if args.old_tree:
            planned.append(("torchrun-old-tree", "job", "", dict(pythonpath_first=args.old_tree, label="old")))
    runs: dict = {}
    for name, which, variant, extra in planned:
        r = runs[name] = step_trace.launch(ns, which, variant, **extra)
        summary = out / f"{r['label']}.sum.json"
        if summary.exists():
            s = json.loads(summary.read_text())
            r["losses"] = s.get("losses")
            r["job_tokens_per_s"] = s["ranks"][0]["tokens_per_s"] if s.get("ranks") else None
        record(args, batch, runs)
    return runs


def ray_run(s, steps: int, warm: int) -> dict:
    t = time.time()
    try:
        local.up(s)
        up_s = round(time.time() - t, 1)
        rec = gpu_runs.ray_train(with_overrides(s, data="learnable"), "learnable", steps=steps, warmup=warm)
        return dict(rec, cluster_up_s=up_s)
    finally:
        local.down(s)


def record(args, batch: int, runs: dict) -> dict:
    """The figures of the runs so far (``None`` where a run is missing), written to DIR/vs-yardstick.json."""
    ray = runs.get("ray-train") or {}
    probe = (runs.get("yardstick") or {}).get("probe") or {}
    probe_ones = (runs.get("yardstick-norms_ones") or {}).get("probe") or {}
    tps = ray.get("tokens_per_s_per_gpu")
    rec = dict(
        gpu=gpu_runs.gpu_facts()[0]["name"],
        world_size=ray.get("world_size"),
        batch=batch,
        seq_len=2048,
        tokens_per_s_per_gpu=tps,
        yardstick_tokens_per_s_per_gpu=probe.get("tok_s_gpu"),
        yardstick_norms_initialised_tokens_per_s_per_gpu=probe_ones.get("tok_s_gpu"),
        mfu=ray.get("mfu"),
        step_s=(batch * 2048 / tps) if tps else None,
        peak_memory_gib=ray.get("peak_gib"),
        commit=args.commit,
        target=TARGET,
        runs=runs,
    )
    if tps and probe.get("tok_s_gpu"):
        rec["ray_over_yardstick"] = tps / probe["tok_s_gpu"]
    if tps and probe_ones.get("tok_s_gpu"):
        rec["ray_over_yardstick_norms_initialised"] = tps / probe_ones["tok_s_gpu"]
    (Path(args.out) / "vs-yardstick.json").write_text(json.dumps(rec, indent=1, default=str))
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", default=str(step_trace.YARDSTICK), help="the yardstick script (default: %(default)s)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--old-tree", default="", help="a checkout of raytrain_helpers to run the torchrun loop from too")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", nargs="*", default=[], choices=["torchrun"], help="leave these runs out")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    s = gpu_runs.settings(steps=args.steps, bench_steps=args.steps)
    batch = train.job_config(s, run_name="probe-batch").batch_size
    runs = probe_runs(args, batch, out)
    runs["ray-train"] = ray_run(s, args.steps, s.train.bench_warmup_steps)
    rec = record(args, batch, runs)
    print(json.dumps({k: v for k, v in rec.items() if k != "runs"}, indent=1, default=str))
    for name, r in runs.items():
        keys = ("ok", "probe", "job_tokens_per_s", "tokens_per_s_per_gpu", "zero_params_before_first_step", "error")
        print(name, json.dumps({k: r.get(k) for k in keys}, default=str)[:1500])
    return 0


if __name__ == "__main__":
    sys.exit(main())
