"""Where a local job's time goes, on a warm cluster: submit -> first step -> last step -> job finished, as JSON.

    python benchmarks/local_job_timeline.py [--runs 2] [--out FILE] [-p NAME VALUE ...]

Starts the local cluster when it is not running (and stops it at the end only then), submits 05's job
(``rt.steps.train.submit``, the default settings: tiny preset, 8 steps, learnable data, CPU workers) ``--runs``
times under new run names, and times each step as the job's log brings it back. The first run on a fresh cluster
pays for cold caches; the figures of every run are kept. ``machine_cpu_s``: the CPU time the whole machine spent
while the job ran (from ``/proc/stat``, Linux only; the idle cluster's own share included), on a quiet machine
what the job costs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raytrain_helpers.core import config as settings_config  # noqa: E402
from raytrain_helpers.steps import train  # noqa: E402
from raytrain_helpers.targets import local  # noqa: E402


class StepClock:
    """A ``progress`` for ``submit``: the time each step's line came back."""

    def __init__(self, t0: float):
        self.t0, self.at = t0, {}

    def update(self, metrics: dict) -> None:
        self.at.setdefault(int(metrics["step"]), round(time.time() - self.t0, 2))

    def close(self) -> None:
        pass


def machine_cpu_s() -> float | None:
    """CPU seconds the machine has spent busy since boot (user, nice, system; ``/proc/stat``), None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:4]
    except OSError:
        return None
    return sum(int(f) for f in fields) / os.sysconf("SC_CLK_TCK")


def one_job(settings) -> dict:
    t0, cpu0 = time.time(), machine_cpu_s()
    clock = StepClock(t0)
    run = train.submit(settings, run_name=f"timeline-{uuid.uuid4().hex[:6]}", quiet=True, progress=clock)
    end, cpu1 = round(time.time() - t0, 2), machine_cpu_s()
    steps = sorted(clock.at)
    return dict(
        ok=run.ok,
        status=run.status,
        steps=len(steps),
        submit_to_first_step_s=clock.at[steps[0]] if steps else None,
        submit_to_last_step_s=clock.at[steps[-1]] if steps else None,
        submit_to_finished_s=end,
        machine_cpu_s=round(cpu1 - cpu0, 1) if cpu0 is not None else None,
        step_arrivals_s=[clock.at[s] for s in steps],
        mean_step_compute_s=sum(r["mean_step_time_s"] for r in run.ranks) / len(run.ranks) if run.ranks else None,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    args = ap.parse_args(argv)
    s = settings_config.load(**dict(settings_config.parse_param(k, v) for k, v in args.p))
    started = not local.status(s).running
    t = time.time()
    if started:
        local.up(s)
    rec = dict(
        benchmark="local job timeline (warm cluster)",
        cpus=os.cpu_count(),
        preset=s.train.model_preset,
        steps=s.train.steps,
        worker_nodes=s.local.worker_nodes,
        cluster_up_s=round(time.time() - t, 1) if started else None,
    )
    try:
        rec["runs"] = [one_job(s) for _ in range(args.runs)]
    finally:
        if started:
            local.down(s)
    text = json.dumps(rec, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0 if all(r["ok"] for r in rec["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
