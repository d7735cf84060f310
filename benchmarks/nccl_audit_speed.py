"""How fast the NCCL audit reads logs: synthetic NCCL_DEBUG=INFO output of growing runs (prints JSON).

    PYTHONPATH=$PWD python benchmarks/nccl_audit_speed.py [--repeat 3]

Each case is a whole run's interleaved NCCL output (init, aws-ofi-nccl, every channel line) from the
test generator in tests/unit/nccl/synth.py, optionally behind Ray driver prefixes. Reports lines/s and
seconds for parse + audit (best of --repeat), and the verdict as a sanity check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raytrain_helpers import nccl  # noqa: E402
from tests.unit.nccl import synth  # noqa: E402

CASES = [
    ("2x4 efa", dict(nodes=2, gpus=4, nchannels=2), False),
    ("2x4 efa, ray prefixes", dict(nodes=2, gpus=4, nchannels=2), True),
    ("4x8 efa, 16 channels", dict(nodes=4, gpus=8, nchannels=16), False),
    ("16x8 efa, 32 channels", dict(nodes=16, gpus=8, nchannels=32), False),
    ("16x8 efa, 32 channels, ray prefixes", dict(nodes=16, gpus=8, nchannels=32), True),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out = []
    for name, kw, ray in CASES:
        text = synth.run_log(**kw)
        if ray:
            text = synth.ray_prefixed(text)
        best = float("inf")
        res = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = nccl.audit(text, expect="efa")
            best = min(best, time.perf_counter() - t0)
        lines = text.count("\n")
        out.append(
            {
                "case": name,
                "ranks": kw["nodes"] * kw["gpus"],
                "lines": lines,
                "bytes": len(text.encode()),
                "seconds": round(best, 4),
                "lines_per_s": int(lines / best),
                "verdict": res.verdict,
                "pairs": len(res.world.pairs),
            }
        )
    print(json.dumps({"benchmark": "nccl_audit_speed", "python": sys.version.split()[0], "results": out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
