"""01 on the local target: what this machine offers (CPUs, memory, GPUs) against the local cluster's shape."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any

from ...core.constants import GIB
from ...core.settings import Settings
from ...core.tables import table
from ...plan.memory import MemoryPlan, plan_for

#: Device files of a GPU driver torch.cuda can use (NVIDIA, or AMD ROCm): none of them, no GPU to ask torch about.
GPU_DEVICE_FILES = ("/dev/nvidia[0-9]*", "/dev/kfd")


def gpu_driver_present() -> bool:
    """A GPU driver's device files exist on this machine: only then is importing torch to count GPUs worth it (the
    import costs a 2-core machine about 2 s, at each job's submit from a fresh kernel)."""
    return any(glob.glob(pattern) for pattern in GPU_DEVICE_FILES)


def _visible_gpus() -> list[dict[str, Any]]:
    if not gpu_driver_present():
        return []
    try:
        import torch
    except ImportError:  # pragma: no cover
        return []
    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        prop = torch.cuda.get_device_properties(i)
        out.append(dict(index=i, name=prop.name, mem_gib=prop.total_memory / GIB))
    return out


def _mem_available_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 / GIB
    except OSError:  # pragma: no cover
        pass
    return float("nan")


@dataclass
class LocalCapacity:
    cpus: int
    mem_available_gib: float
    gpus: list[dict[str, Any]]
    worker_nodes: int
    gpus_per_worker_node: int
    slots_per_node: int
    world_size: int
    backend: str
    required_mem_gib: float
    plan: MemoryPlan
    problems: list[str]
    #: CPU cores the worker raylets ask for (worker nodes x CPUs each)
    cpus_needed: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def show(self) -> None:
        table(
            self.rows(), ["resource", "found", "required", "verdict"], title="capacity on this machine (local target)"
        )
        table(self.plan.rows(), ["memory plan", "value"], title="FSDP memory plan per device", max_width=80)
        for p in self.problems:
            print(f"PROBLEM: {p}")
        print("capacity: OK" if self.ok else "capacity: NOT ENOUGH (see the problems above)")

    def as_dict(self) -> dict[str, Any]:
        return dict(ok=self.ok, rows=self.rows(), problems=self.problems)

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(resource, found, required, verdict)."""
        gpu_found = f"{len(self.gpus)} x {self.gpus[0]['name']}" if self.gpus else "none"
        need_gpu = self.worker_nodes * self.gpus_per_worker_node
        rows = [
            (
                "CPU cores",
                str(self.cpus),
                f"{self.worker_nodes} worker node(s) x {cpus_per_node(self.slots_per_node, need_gpu)}",
                "ok" if self.cpus >= self.cpus_needed else "SHORT",
            ),
            (
                "memory available",
                f"{self.mem_available_gib:.1f} GiB",
                f"~{self.required_mem_gib:.1f} GiB",
                "ok" if self.mem_available_gib >= self.required_mem_gib else "SHORT",
            ),
            (
                "GPUs",
                gpu_found,
                str(need_gpu) if need_gpu else "0 (CPU run, gloo)",
                "ok" if len(self.gpus) >= need_gpu else "SHORT",
            ),
            (
                "training workers",
                f"{self.world_size} ({self.backend})",
                f">= {MIN_WORLD} over {self.worker_nodes} node(s)",
                "ok" if self.world_size >= MIN_WORLD else "SHORT",
            ),
        ]
        if self.plan.device_mem_gib is not None:
            rows.append(
                (
                    "per-device memory",
                    f"{self.plan.device_mem_gib:.0f} GiB",
                    f"{self.plan.peak_per_device_gib:.2f} GiB planned peak",
                    "ok" if self.plan.fits else "SHORT",
                )
            )
        return rows


def resolve_local_gpus(settings: Settings, visible: int | None = None) -> int:
    """GPUs per worker raylet: -1 splits the visible GPUs evenly over the worker nodes."""
    g = settings.local.gpus_per_worker_node
    if g >= 0:
        return g
    if visible is None:
        visible = len(_visible_gpus())
    return visible // settings.local.worker_nodes if visible >= settings.local.worker_nodes else 0


def local_world_size(settings: Settings, gpus_per_node: int) -> tuple[int, int]:
    """(slots per worker node, world size)."""
    slots = gpus_per_node if gpus_per_node > 0 else settings.local.cpus_per_worker_node
    total = slots * settings.local.worker_nodes
    n = settings.train.num_workers or total
    return slots, n


#: The smallest world size the tutorial trains with: FSDP over one rank shards nothing.
MIN_WORLD = 2


def cpus_per_node(slots: int, gpus_per_node: int) -> int:
    """CPU cores one worker raylet needs: one per training slot on CPU, one for the GPU workers' driver side."""
    return 1 if gpus_per_node else slots


def local_resources(settings: Settings) -> LocalCapacity:
    gpus = _visible_gpus()
    g = resolve_local_gpus(settings, len(gpus))
    slots, world = local_world_size(settings, g)
    problems: list[str] = []
    if settings.train.num_workers and settings.train.num_workers > slots * settings.local.worker_nodes:
        problems.append(
            f"num_workers = {settings.train.num_workers} but the local cluster has only "
            f"{slots * settings.local.worker_nodes} worker slots "
            f"({settings.local.worker_nodes} nodes x {slots}). Fix: num_workers: 0 (all) or more "
            f"worker_nodes / cpus_per_worker_node"
        )
    cpus = os.cpu_count() or 1
    cpus_needed = settings.local.worker_nodes * cpus_per_node(slots, g)
    if cpus < cpus_needed:
        problems.append(
            f"{settings.local.worker_nodes} worker nodes x {cpus_per_node(slots, g)} CPU(s) need {cpus_needed} cores, "
            f"this machine has {cpus}. Fix: fewer local.worker_nodes or local.cpus_per_worker_node"
        )
    if world < MIN_WORLD:
        problems.append(
            f"{world} training worker(s): FSDP across nodes needs at least {MIN_WORLD}. Fix: local.worker_nodes: 2 "
            "(or more cpus_per_worker_node)"
        )
    if g * settings.local.worker_nodes > len(gpus):
        problems.append(
            f"gpus_per_worker_node = {g} x {settings.local.worker_nodes} nodes needs "
            f"{g * settings.local.worker_nodes} GPUs, {len(gpus)} visible. Fix: gpus_per_worker_node: -1"
        )
    device_mem = min(x["mem_gib"] for x in gpus) if (gpus and g) else None
    plan = plan_for(settings, world, on_gpu=bool(g), device_mem_gib=device_mem)
    # every Ray node ~0.4 GiB + object store; every CPU training worker: torch + the model state
    ray_overhead = 0.5 + settings.local.worker_nodes * (0.4 + settings.local.object_store_mb / 1024)
    per_worker = 0.6 + (0 if g else plan.peak_per_device_gib)
    required = ray_overhead + world * per_worker
    mem = _mem_available_gib()
    if mem == mem and mem < required:
        problems.append(
            f"about {required:.1f} GiB of memory needed, {mem:.1f} GiB available. Fix: fewer "
            f"worker_nodes, a smaller batch_size/seq_len, or the tiny preset"
        )
    if plan.fits is False:
        problems.append(
            f"planned peak {plan.peak_per_device_gib:.1f} GiB per GPU exceeds 90% of "
            f"{plan.device_mem_gib:.0f} GiB. Fix: {'; '.join(plan.notes)}"
        )
    return LocalCapacity(
        cpus=cpus,
        cpus_needed=cpus_needed,
        mem_available_gib=mem,
        gpus=gpus,
        worker_nodes=settings.local.worker_nodes,
        gpus_per_worker_node=g,
        slots_per_node=slots,
        world_size=world,
        backend="nccl" if g else "gloo",
        required_mem_gib=required,
        plan=plan,
        problems=problems,
    )


#: Disk each attendee's local cluster may write beside its object-store spill: Ray's session logs and the run's
#: checkpoints and exported model of the small presets (an assumption the hand-out prints, not a measurement).
WORKSHOP_DISK_GIB = 2.0


def workshop_need(settings: Settings) -> dict[str, Any]:
    """What one workshop attendee's local cluster takes from a shared host: CPU cores and memory as 01 computes
    them (:func:`local_resources`), GPUs, its two fixed ports, and disk under its ``temp_root`` (the object store
    spills there, up to its size per node, plus :data:`WORKSHOP_DISK_GIB`)."""
    cap = local_resources(settings)
    nodes = settings.local.worker_nodes + 1  # the head raylet too
    return dict(
        cpus=cap.cpus_needed,
        memory_gib=cap.required_mem_gib,
        gpus=cap.worker_nodes * cap.gpus_per_worker_node,
        ports=[settings.local.gcs_port, settings.local.dashboard_port],
        disk_gib=nodes * settings.local.object_store_mb / 1024 + WORKSHOP_DISK_GIB,
        temp_root=settings.local.temp_root_path(),
    )


def host_capacity(path: str = "/tmp") -> dict[str, float]:
    """This machine: CPU cores, total memory (GiB), visible GPUs and free disk (GiB) under ``path``."""
    import shutil

    total = float("nan")
    try:
        with open("/proc/meminfo") as f:
            total = next(int(ln.split()[1]) * 1024 / GIB for ln in f if ln.startswith("MemTotal:"))
    except (OSError, StopIteration):  # pragma: no cover
        pass
    return dict(
        cpus=float(os.cpu_count() or 1),
        memory_gib=total,
        gpus=float(len(_visible_gpus())),
        disk_gib=shutil.disk_usage(path).free / GIB,
    )
