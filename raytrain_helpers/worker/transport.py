"""The transport check's Ray job: ``python -m raytrain_helpers.worker.transport --config job_config.json``.

Before the training job, one all-reduce between the worker nodes says how fast the ranks really talk and over what.
The driver (on the head) reserves one bundle per worker node with a ``STRICT_SPREAD`` placement group (so every rank
is on a node of its own), starts one rank on each, and each rank sets up ``torch.distributed`` (NCCL on GPUs, gloo
on CPUs), checks one small all-reduce's sum, then times ``iters`` all-reduces of ``size_bytes`` after ``warmup``.
NCCL's ``NCCL_DEBUG=INFO`` lines go to a file per rank (``NCCL_DEBUG_FILE``, ``%h`` host and ``%p`` pid: NCCL user
guide, Troubleshooting > Logging, checked 2026-12-04), which the rank returns: the notebook side audits them. The
driver prints one ``RAYTRAIN_RESULT {json}`` line.

Bandwidth as nccl-tests reports it (nvidia/nccl-tests ``src/all_reduce.cu``, ``AllReduceGetBw``, checked
2026-12-04): algbw = bytes / time, busbw = algbw * 2(n-1)/n for an all-reduce of n ranks; here the time is the
slowest rank's mean per all-reduce.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import sys
import tempfile
import time
from datetime import timedelta
from typing import Any, ClassVar, Literal

from ..core.constants import RESULT_PREFIX, TRAIN_SLOT
from .job_config import JobConfigError, TypedConfig, uses_gpu

#: The most NCCL log text one rank returns (the first lines: version, network, channels).
MAX_LOG_CHARS = 400_000
#: NCCL_DEBUG values that already print the INFO lines the audit reads.
VERBOSE = ("INFO", "TRACE")


class CheckConfig(TypedConfig):
    """What the transport check runs: its ``job_config.json`` (built by ``steps/transport.py: job_config``)."""

    run_name: str
    """The check's run (``<run_name>-transport``): its job's log goes to ``runs/<run_name>/job.log``."""
    marker: str
    """A short random id of this submission: the end of the job's submission id and of its staged working_dir."""
    use_gpu: bool | Literal["auto"]
    """One GPU per rank and NCCL, or CPU ranks and gloo; ``auto``: the driver decides from the cluster's GPUs."""
    size_bytes: int
    """Bytes per rank of each timed all-reduce (fp32 elements)."""
    iters: int = 5
    """Timed all-reduces; the check reports the slowest rank's mean time of one."""
    warmup: int = 2
    """Untimed all-reduces before the timed ones (the first ones set up NCCL's channels)."""
    wait_s: float = 60
    """Seconds the driver waits for one free bundle on every worker node (a running job may hold them)."""
    collective_timeout_s: float = 120
    """``torch.distributed``'s timeout of each collective, in seconds."""

    #: what the error messages call it
    WHAT: ClassVar[str] = "transport check config"


def bus_bandwidth(nbytes: int, seconds: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes/s) of an all-reduce of ``nbytes`` per rank that took ``seconds``."""
    if seconds <= 0 or nranks < 1:
        raise ValueError(f"an all-reduce needs a positive time and at least one rank (got {seconds} s, {nranks})")
    algbw = nbytes / 1e9 / seconds
    return algbw, algbw * 2 * (nranks - 1) / nranks


def worker_nodes(nodes: list[dict[str, Any]], use_gpu: bool) -> list[dict[str, Any]]:
    """The alive nodes a rank may run on (a ``train_slot``, and a GPU when ``use_gpu``), as ``ray.nodes()`` lists."""
    out = []
    for n in nodes:
        res = n.get("Resources") or {}
        if n.get("Alive") and res.get(TRAIN_SLOT, 0) >= 1 and (not use_gpu or res.get("GPU", 0) >= 1):
            out.append(n)
    return out


class Rank:
    """One rank of the check (a Ray actor on a node of its own)."""

    def __init__(self, use_gpu: bool):
        self.use_gpu = use_gpu
        self.log_dir = tempfile.mkdtemp(prefix="raytrain-nccl-check-")
        if use_gpu:  # before torch loads NCCL: NCCL reads these once, at its first call
            if os.environ.get("NCCL_DEBUG", "").upper() not in VERBOSE:
                os.environ["NCCL_DEBUG"] = "INFO"
            os.environ["NCCL_DEBUG_FILE"] = os.path.join(self.log_dir, "nccl.%h.%p.log")

    def address(self) -> str:
        """``tcp://IP:PORT`` for the process group's rendezvous, on this rank's node (rank 0's)."""
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def run(self, rank: int, world: int, init_method: str, cfg: CheckConfig) -> dict[str, Any]:
        import ray
        import torch
        import torch.distributed as dist

        device = torch.device("cuda", 0) if self.use_gpu else torch.device("cpu")
        backend = "nccl" if self.use_gpu else "gloo"
        timeout = timedelta(seconds=float(cfg.collective_timeout_s or 120))
        if self.use_gpu:
            torch.cuda.set_device(device)
        dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world, timeout=timeout)
        try:
            probe = torch.full((4,), float(rank + 1), device=device)
            dist.all_reduce(probe)
            sum_ok = float(probe[0].item()) == world * (world + 1) / 2
            seconds = _timed_all_reduces(dist, torch, device, cfg)
        finally:
            dist.destroy_process_group()
        return dict(
            rank=rank,
            world=world,
            backend=backend,
            node_id=ray.get_runtime_context().get_node_id(),
            host=socket.gethostname(),
            pid=os.getpid(),
            device=str(torch.cuda.get_device_name(0)) if self.use_gpu else "cpu",
            sum_ok=sum_ok,
            seconds=seconds,
            nccl_log=self.nccl_log(),
        )

    def nccl_log(self) -> str:
        """This process's NCCL log text (empty on CPU: gloo writes none)."""
        text = ""
        for path in sorted(glob.glob(os.path.join(self.log_dir, f"nccl.*.{os.getpid()}.log"))):
            with open(path, errors="replace") as f:
                text += f.read(MAX_LOG_CHARS - len(text))
        return text


def _timed_all_reduces(dist, torch, device, cfg: CheckConfig) -> float:
    """Mean seconds per all-reduce of ``size_bytes`` (fp32), after ``warmup`` untimed ones."""
    buf = torch.zeros(max(1, cfg.size_bytes // 4), dtype=torch.float32, device=device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(cfg.warmup):
        dist.all_reduce(buf)
    sync()
    dist.barrier()
    iters = max(1, cfg.iters)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    sync()
    return (time.perf_counter() - t0) / iters


def summarize(ranks: list[dict[str, Any]], size_bytes: int) -> dict[str, Any]:
    """The ranks' results as one record: the slowest rank's time, algbw and busbw, and each rank's facts."""
    world = len(ranks)
    seconds = max(r["seconds"] for r in ranks)
    algbw, busbw = bus_bandwidth(size_bytes, seconds, world)
    return dict(
        ok=all(r["sum_ok"] for r in ranks),
        error=None if all(r["sum_ok"] for r in ranks) else "the all-reduce returned a wrong sum",
        backend=ranks[0]["backend"],
        world=world,
        size_bytes=size_bytes,
        seconds=seconds,
        algbw_gbs=algbw,
        busbw_gbs=busbw,
        ranks=[{k: v for k, v in r.items() if k != "nccl_log"} for r in ranks],
        logs={f"rank{r['rank']}@{r['host']}": r["nccl_log"] for r in ranks if r["nccl_log"]},
    )


def run(cfg: CheckConfig) -> dict[str, Any]:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ray.init(log_to_driver=True)
    use_gpu = uses_gpu(cfg.use_gpu, ray.cluster_resources())
    nodes = worker_nodes(ray.nodes(), use_gpu)
    base = dict(use_gpu=use_gpu, marker=cfg.marker, nodes=len(nodes))
    if len(nodes) < 2:
        return dict(base, ok=True, skipped=f"{len(nodes)} worker node(s): no pair of nodes to check", world=len(nodes))
    world = len(nodes)
    bundle = {TRAIN_SLOT: 1, "CPU": 1, **({"GPU": 1} if use_gpu else {})}
    pg = placement_group([dict(bundle) for _ in range(world)], strategy="STRICT_SPREAD")
    ready, _ = ray.wait([pg.ready()], timeout=float(cfg.wait_s or 60))
    if not ready:
        remove_placement_group(pg)
        return dict(
            base,
            ok=False,
            error=f"no {world} worker nodes with a free {bundle} within {cfg.wait_s or 60:g} s: a job still holds "
            f"them, or a node is gone. Fix: wait for the running job (or stop it), then run the check again",
        )
    print(f"[check] {world} ranks, one per worker node, backend={'nccl' if use_gpu else 'gloo'}", flush=True)
    actor = ray.remote(Rank)
    ranks = [
        actor.options(
            num_cpus=1,
            num_gpus=1 if use_gpu else 0,
            resources={TRAIN_SLOT: 1},
            scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
        ).remote(use_gpu)
        for i in range(world)
    ]
    init_method = ray.get(ranks[0].address.remote())
    try:
        results = ray.get([r.run.remote(i, world, init_method, cfg) for i, r in enumerate(ranks)])
    finally:
        for r in ranks:
            ray.kill(r)
        remove_placement_group(pg)
    return dict(base, **summarize(results, cfg.size_bytes))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    args = ap.parse_args(argv)
    with open(args.config) as f:
        text = f.read()
    try:  # before Ray starts: a misspelt or missing key fails the job at once, naming the key
        cfg = CheckConfig.from_json(text)
    except JobConfigError as e:
        raise SystemExit(f"[check] {args.config}: {e}") from None
    t0 = time.time()
    try:
        out = run(cfg)
    except Exception as e:  # a rank failed (NCCL error, timeout): report it, then fail the job
        out = dict(ok=False, error=f"{type(e).__name__}: {e}", marker=cfg.marker)
    out["wall_s"] = time.time() - t0
    print(RESULT_PREFIX + json.dumps(out, default=str), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
