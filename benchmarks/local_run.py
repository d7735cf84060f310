"""Wall time of the main command and peak memory of the local cluster, as JSON.

    python benchmarks/local_run.py [-p NAME VALUE ...]

Runs ``raytrain-tutorial run --force`` (all notebooks, local target) in a throw-away runs directory while
sampling, twice a second, the resident memory of every process of the local Ray cluster (raylets, GCS,
dashboard, agents, train workers) and of everything else the run started (papermill kernels).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from raytrain_helpers.core import config as settings_config
from raytrain_helpers.targets import local


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int(Path(d, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def main(argv=None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    settings = (
        settings_config.load(
            **dict(settings_config.parse_param(k, v) for k, v in zip(args[1::3], args[2::3], strict=False))
        )
        if args
        else settings_config.load()
    )
    peak = {"cluster": 0, "total": 0}
    stop = threading.Event()

    with tempfile.TemporaryDirectory(prefix="raytrain-bench-") as runs:
        env = dict(os.environ, RAYTRAIN_RUNS_DIR=runs)
        t0 = time.time()
        proc = subprocess.Popen(
            ["raytrain-tutorial", "run", "--force", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

        def sample():
            while not stop.is_set():
                cluster = sum(_rss(p) for p in local.our_pids(settings))
                total = sum(_rss(p) for p in _descendants(proc.pid) | set(local.our_pids(settings)))
                peak["cluster"] = max(peak["cluster"], cluster)
                peak["total"] = max(peak["total"], total)
                time.sleep(0.5)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        out, _ = proc.communicate()
        wall = time.time() - t0
        stop.set()
        th.join()
    tail = [line for line in out.splitlines() if line.startswith("|") or line.startswith("total")]
    result = dict(
        benchmark="main command (raytrain-tutorial run, local target)",
        ok=proc.returncode == 0,
        wall_s=round(wall, 1),
        peak_rss_local_cluster_mib=round(peak["cluster"] / 2**20),
        peak_rss_cluster_plus_kernels_mib=round(peak["total"] / 2**20),
        cpus=os.cpu_count(),
        preset=settings.train.model_preset,
        steps=settings.train.steps,
        worker_nodes=settings.local.worker_nodes,
        summary=tail,
    )
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
