"""liger kernels against plain PyTorch on GPUs: the same seed and data give the same loss, and the memory plan
holds with and without them.

    python benchmarks/kernels_check.py --out DIR [--steps 8]

Runs the job's loop under torchrun (benchmarks/torchrun_loop.py) on every visible GPU, qwen2.5-1.5b, seq 2048:
``none`` and ``liger`` at batch 4 (the loss comparison, step by step), then ``none`` at its own batch auto (the
plan without kernels at its largest). Writes DIR/kernels_check.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gpu_runs

#: Largest allowed difference of the mean loss over ranks, per step (bf16 compute; the loss starts near 11.9).
LOSS_TOLERANCE = 0.02
#: The memory plan must be within this share of the measured peak (max_memory_allocated).
PLAN_TOLERANCE = 0.10


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {}
    for kernels in ("none", "liger"):
        s = gpu_runs.settings(batch_size=4, kernels=kernels)
        runs[f"{kernels}-b4"] = gpu_runs.torchrun(s, f"{kernels}-b4", out, steps=args.steps, warmup=3)
    s = gpu_runs.settings(batch_size="auto", kernels="none")
    runs["none-auto"] = gpu_runs.torchrun(s, "none-auto", out, steps=args.steps, warmup=3)
    rec: dict = dict(loss_tolerance=LOSS_TOLERANCE, plan_tolerance=PLAN_TOLERANCE, runs=runs)
    a, b = runs["none-b4"], runs["liger-b4"]
    if a["ok"] and b["ok"]:
        diffs = [abs(x - y) for x, y in zip(a["losses"], b["losses"], strict=True)]
        rec["loss_max_abs_diff"] = max(diffs)
        rec["loss_diffs"] = diffs
        rec["loss_agrees"] = max(diffs) <= LOSS_TOLERANCE
    rec["plan_within_tolerance"] = {k: abs(r["plan_error"]) <= PLAN_TOLERANCE for k, r in runs.items() if r.get("ok")}
    (out / "kernels_check.json").write_text(json.dumps(rec, indent=2, default=str))
    print(json.dumps({k: v for k, v in rec.items() if k != "runs"}, indent=2, default=str))
    for k, r in runs.items():
        keys = ("ok", "batch_size", "kernels", "tokens_per_s_per_gpu", "mfu", "peak_gib", "planned_peak_gib", "error")
        print(k, json.dumps({x: r.get(x) for x in keys}, default=str)[:1500])
    return 0


if __name__ == "__main__":
    sys.exit(main())
