"""05 -> 06 -> 07 on local GPUs, headless, without Jupyter: the evidence run for the transport audit.

    python benchmarks/gpu_evidence.py --out DIR [-p NAME VALUE ...]

Starts the local cluster (worker raylets split the GPUs), runs the FSDP job (05), verifies it with every
criterion and the NCCL audit (06), runs the transport A/B benchmark (07: P2P/NVLink vs
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), stops the cluster, and writes into DIR:
``gpu_evidence.json`` (figures, criteria, audits, comparison) and the workers' NCCL logs of each run.
Prints the JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import raytrain_helpers as rt
from raytrain_helpers.core import config as settings_config
from raytrain_helpers.steps import benchmark, train, verify
from raytrain_helpers.targets import local


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--skip-bench", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    params = dict(
        model_preset="qwen2.5-1.5b",
        seq_len=2048,
        batch_size=4,
        steps=10,
        checkpoint_every=0,
        bench_steps=10,
        bench_warmup_steps=3,
        run_name="gpu-evidence",
    )
    params.update(dict(settings_config.parse_param(k, v) for k, v in args.p))
    s = rt.load(**params)
    rec: dict = dict(settings=s.flat(), started=time.strftime("%Y-%m-%dT%H:%M:%S"))
    t0 = time.time()
    try:
        info = local.up(s)
        info.show()
        rec["cluster"] = dict(nodes=info.nodes, up_s=round(time.time() - t0, 1))
        cap = rt.capacity.check(s)
        cap.show()
        rec["plan"] = cap.plan.as_dict()

        t = time.time()
        run = train.submit(s, progress=False, quiet=True)
        run.show()
        rec["train"] = dict(
            status=run.status,
            ok=run.ok,
            wall_s=round(time.time() - t, 1),
            metrics={k: v for k, v in run.metrics.items() if k not in ("step_times",)},
            error=run.result.get("error"),
        )
        if not run.ok:
            print(run.logs[-5000:])
        logs = verify.worker_logs(s, run)
        (out / "train_nccl.log").write_text("\n".join(f"### {k}\n{v}" for k, v in logs.items()))
        v = verify.verify(s, run, audit=verify.audit_run(s, run, logs))
        v.show()
        if v.audit is not None:
            v.audit.show()
            rec["audit_train"] = json.loads(v.audit.to_json())
        rec["verify"] = json.loads(v.criteria.to_json())

        if not args.skip_bench:
            bench = benchmark.run(s)
            for b in bench:
                (out / f"bench_{b.label}_nccl.log").write_text(b.log_text)
            cmp = benchmark.compare(s, bench, write=False)
            cmp.show()
            rec["benchmark"] = cmp.record
            # the same comparison with the runs' labels swapped must be refused (mislabelled transport)
            if len(bench) == 2:
                from raytrain_helpers import nccl

                wrong = nccl.compare_runs(
                    dict(bench[0].as_compare_input(), expected_transport="socket"),
                    dict(bench[1].as_compare_input(), expected_transport="p2p"),
                )
                rec["mislabelled_refused"] = not wrong.ok
                rec["mislabelled_refusal"] = wrong.refusal
    finally:
        try:
            local.down(s)
        except Exception as e:  # noqa: BLE001
            print(f"down failed: {e}", file=sys.stderr)
        rec["total_s"] = round(time.time() - t0, 1)
        (out / "gpu_evidence.json").write_text(json.dumps(rec, indent=2, default=str))
    print(
        json.dumps(
            {k: rec.get(k) for k in ("train", "benchmark", "mislabelled_refused", "total_s")}, indent=2, default=str
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
