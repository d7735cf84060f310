"""The job's own train loop (``worker/train.py: train_loop_per_worker``) under torchrun, without Ray.

    torchrun --nproc-per-node N benchmarks/torchrun_loop.py --config job_config.json --out summary.json

The loop is the one Ray Train runs; only the five Ray calls it makes are answered by torchrun's equivalents
(rank and world size from the process group, the device from LOCAL_RANK, no checkpoint to resume, reports
kept in memory). Rank 0 writes the run's final report (the summary every rank gathered) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from types import SimpleNamespace
from unittest import mock


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    from raytrain_helpers.worker.job_config import JobConfig

    with open(args.config) as f:
        cfg = JobConfig.from_json(f.read()).replace(checkpoint_every=0, final_checkpoint=False)

    import ray
    import ray.train
    import ray.train.torch
    import torch
    import torch.distributed as dist

    from raytrain_helpers.worker.train import loop_config, train_loop_per_worker

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    reports: list[dict] = []
    ctx = SimpleNamespace(get_world_rank=dist.get_rank, get_world_size=dist.get_world_size)
    node = SimpleNamespace(get_node_id=lambda: f"torchrun-{socket.gethostname()}")
    with (
        mock.patch.object(ray.train, "get_context", lambda: ctx),
        mock.patch.object(ray.train, "get_checkpoint", lambda: None),
        mock.patch.object(ray.train, "report", lambda metrics, checkpoint=None: reports.append(metrics)),
        mock.patch.object(ray.train.torch, "get_device", lambda: device),
        mock.patch.object(ray, "get_runtime_context", lambda: node),
    ):
        train_loop_per_worker(loop_config(cfg))
    if dist.get_rank() == 0:
        with open(args.out, "w") as f:
            json.dump(reports[-1], f, default=str)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
