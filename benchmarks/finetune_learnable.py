"""The qwen2.5-1.5b shape trained on the `learnable` data through 05's path (Ray Jobs API -> TorchTrainer, Ray Data
shards, eval loss), on every local GPU; prints one JSON object: train and eval loss first/last, "the model learned",
throughput, and the export when asked.

    python benchmarks/finetune_learnable.py [--steps 12] [--export] [--out benchmarks/results/FILE.json]

Starts the local cluster (one worker raylet per GPU) when it is not running, and stops it only if it started it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def main(argv=None) -> int:
    import gpu_runs

    from raytrain_helpers.steps import train, verify
    from raytrain_helpers.targets import local

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--export", action="store_true", help="also write the consolidated Hugging Face folder")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    s = gpu_runs.settings(
        data="learnable", eval_every=2, export=args.export, checkpoint_every=0, steps=args.steps, learning_rate=0
    )
    started = not local.status(s).running
    if started:
        local.up(s)
    try:
        t = time.time()
        run = train.submit(s, run_name=f"learnable-{uuid.uuid4().hex[:6]}", quiet=True, progress=False)
        wall = time.time() - t
    finally:
        if started:
            local.down(s)
    m = run.metrics
    losses, evals = m.get("losses") or [], m.get("evals") or []
    ok, evidence = verify.learned(evals, m.get("data"))
    out = dict(
        ok=run.ok,
        error=None if run.ok else run.logs[-3000:],
        preset=s.train.model_preset,
        data=m.get("data"),
        steps=args.steps,
        seq_len=s.train.seq_len,
        batch_size=run.job_config.batch_size if run.job_config else None,
        learning_rate=run.job_config.learning_rate if run.job_config else None,
        world_size=m.get("world_size"),
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        losses=losses,
        evals=evals,
        learned=ok,
        learned_evidence=evidence,
        tokens_per_s=sum(r.get("tokens_per_s", 0) for r in run.ranks),
        export_path=m.get("export_path") if args.export else None,
        job_wall_s=round(wall, 1),
    )
    text = json.dumps(out, indent=1, default=str)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if run.ok and ok else 1


if __name__ == "__main__":
    sys.exit(main())
