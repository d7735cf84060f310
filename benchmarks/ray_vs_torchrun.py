"""Ray's own cost: the job's loop under torchrun and under Ray Train, one call, the same GPUs and settings.

    python benchmarks/ray_vs_torchrun.py --out DIR [-p NAME VALUE ...]

qwen2.5-1.5b, seq 2048, batch auto, kernels auto (the settings 05 runs with on GPUs), one GPU per rank:
1. torchrun (benchmarks/torchrun_loop.py: the same ``train_loop_per_worker``, Ray's calls answered by torchrun);
2. Ray Train through 05's path (local cluster, Ray Jobs API, entrypoint, TorchTrainer), the cluster started
   here and stopped at the end.
Reports tokens/s per GPU (after the warm-up steps), MFU, peak memory against the plan, the predicted tokens/s,
and ray / torchrun. Writes DIR/ray_vs_torchrun.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import gpu_runs

from raytrain_helpers.core import config as settings_config
from raytrain_helpers.core.config import with_overrides
from raytrain_helpers.targets import local

#: Ray Train's step time may cost at most this much throughput against torchrun.
RAY_TARGET = 0.03
#: A Ray job still running after this long is stopped (and recorded as failed, with its log).
RAY_JOB_TIMEOUT_S = 150


def ray_runs(s, variants, rec: dict, *, steps: int, warm: int) -> None:
    """The Ray Train runs: the local cluster (one worker raylet per GPU) started here and stopped after."""
    t = time.time()
    try:
        local.up(s)
        rec["cluster_up_s"] = round(time.time() - t, 1)
        for label, env in variants:
            run_s = with_overrides(s, data="learnable") if label == "learnable" else s
            rec["runs"][f"ray-{label}"] = gpu_runs.ray_train(
                run_s, f"ray-{label}", steps=steps, warmup=warm, env=env, timeout_s=RAY_JOB_TIMEOUT_S
            )
    finally:
        local.down(s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--socket", action="store_true", help="also both runs with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra environment, both runs")
    ap.add_argument("--torchrun-only", action="store_true", help="no Ray run (quick variants of the loop)")
    ap.add_argument("--label", default="", help="suffix of the JSON file's name")
    ap.add_argument("--learnable", action="store_true", help="also Ray Train on 05's default data (learnable)")
    args = ap.parse_args(argv)
    extra = dict(kv.split("=", 1) for kv in args.env)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    s = gpu_runs.settings(**dict(settings_config.parse_param(k, v) for k, v in args.p))
    steps, warm = s.train.bench_steps, s.train.bench_warmup_steps
    variants = [("p2p", dict(extra))]
    if args.socket:
        variants.append(("socket", dict(extra, NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1")))
    rec: dict = dict(settings=s.flat(), env=extra, gpus=gpu_runs.gpu_facts(), ray_target=RAY_TARGET, runs={})
    for label, env in variants:
        name = f"torchrun-{label}"
        rec["runs"][name] = gpu_runs.torchrun(s, name, out, steps=steps, warmup=warm, env=env)
    if not args.torchrun_only:
        ray_variants = list(variants)
        if args.learnable:
            ray_variants.append(("learnable", {}))
        ray_runs(s, ray_variants, rec, steps=steps, warm=warm)
    for label, _ in variants:
        a, b = rec["runs"][f"torchrun-{label}"], rec["runs"].get(f"ray-{label}", {})
        if a.get("ok") and b.get("ok"):
            ratio = b["tokens_per_s_per_gpu"] / a["tokens_per_s_per_gpu"]
            rec[f"ray_over_torchrun_{label}"] = ratio
            rec[f"ray_within_target_{label}"] = ratio >= 1 - RAY_TARGET
    (out / f"ray_vs_torchrun{args.label}.json").write_text(json.dumps(rec, indent=2, default=str))
    print(json.dumps({k: v for k, v in rec.items() if k not in ("runs", "settings")}, indent=2, default=str))
    for k, r in rec["runs"].items():
        keys = ("ok", "batch_size", "kernels", "tokens_per_s_per_gpu", "mfu", "mfu_reported_by_job", "peak_gib")
        keys += ("planned_peak_gib", "predicted_tokens_per_s_per_gpu", "prediction_error", "wall_s", "error")
        print(k, json.dumps({x: r.get(x) for x in keys}, default=str)[:1500])
    return 0


if __name__ == "__main__":
    sys.exit(main())
