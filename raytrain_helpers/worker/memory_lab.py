"""FSDP2's memory, measured here: one training step of a small Qwen2 prepared by a sharding function, on CPU.

:func:`measure` builds the model with the job's own builder, hands it to a sharding function (the job's
:func:`~raytrain_helpers.worker.model.shard_model`, or one you write), runs one forward, backward and AdamW step on a
gloo process group of one rank in this process, and reports the step's peak memory by kind, as PyTorch's
``FSDPMemTracker`` (``torch.distributed._tools.fsdp2_mem_tracker``, PyTorch 2.13) counts every tensor FSDP and
autograd allocate. With one rank a shard is the whole tensor, so the sharded weights, gradients and optimizer state
are what N ranks would each hold times N; what the sharding *function* changes (how long each layer's full weights
live, which activations backward keeps) is the same at any number of ranks. A step takes under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.presets import PRESETS
from . import kernels
from . import model as model_mod

#: The lab's model: the tiny preset made deeper and wider (6 decoder layers of width 128), so that the decoder layers
#: hold most of the weights, as in a real model.
LAB_MODEL = dict(PRESETS["tiny"], hidden_size=128, intermediate_size=352, num_hidden_layers=6)
#: What the tracker's categories are called here (its ``_FSDPRefType`` names), in the order they are shown.
KINDS = {
    "SHARDED_PARAM": "sharded weights",
    "UNSHARDED_PARAM": "full weights (gathered)",
    "ALL_GATHER": "all-gather buffers",
    "ACT": "activations",
    "SHARDED_GRAD": "gradients (sharded)",
    "UNSHARDED_GRAD": "gradients (full)",
    "REDUCE_SCATTER": "reduce-scatter buffers",
    "OPT": "optimizer state",
    "TEMP": "temporaries",
}


def measure(
    shard: Callable[..., Any], *, model_cfg: dict[str, Any] | None = None, batch_size: int = 2, seq_len: int = 256
) -> dict[str, int]:
    """Bytes at the peak of one training step, by kind (:data:`KINDS`' names) and ``"total"``.

    ``shard(model, mixed_precision=False)`` prepares the freshly built model, as the job's ``shard_model`` does."""
    import torch

    tracker = _tracked_step(shard, model_cfg or LAB_MODEL, batch_size, seq_len)
    return by_kind(tracker.get_tracker_snapshot("peak")[torch.device("cpu")])


#: The points of a step :func:`timeline` reports, per FSDP module, in the tracker's ``_FSDPModState`` values: after
#: the module's weights were gathered for forward, after its forward (weights freed again), after they were gathered
#: for backward, after its gradients were reduce-scattered.
FORWARD_POINTS = (("After Pre-Forward", "gathered"), ("After Post-Forward", "forward done"))
BACKWARD_POINTS = (("After Pre-Backward", "gathered"), ("After Post-Backward", "reduced"))


def timeline(
    shard: Callable[..., Any], *, model_cfg: dict[str, Any] | None = None, batch_size: int = 2, seq_len: int = 256
) -> list[dict[str, Any]]:
    """Memory through one training step, as ``[{"phase", "module", "point", "bytes": {kind: bytes, "total"}}]``:
    forward through the modules in order (the root first and last), backward in reverse, then after AdamW's step.

    The tracker snapshots each FSDP module before and after FSDP's own hooks (``FSDPMemTracker``'s
    ``_FSDPModState``); the points in :data:`FORWARD_POINTS` and :data:`BACKWARD_POINTS` are kept."""
    import torch

    cpu = torch.device("cpu")
    tracker = _tracked_step(shard, model_cfg or LAB_MODEL, batch_size, seq_len)
    mods = [st for st in tracker.memory_tracking.values() if any(st.snapshots.values())]
    root, layers = mods[0], mods[1:]  # the root registers first: its pre-forward runs before every layer's
    out: list[dict[str, Any]] = []

    def add(phase: str, st: Any, points: tuple, last: bool = False) -> None:
        for state, what in points:
            snaps = [v for k, v in st.snapshots.items() if getattr(k, "value", str(k)) == state]
            if snaps and snaps[0]:
                name = ".".join(st.mod_fqn.split(".")[-2:]) if st is not root else "root"
                out.append(dict(phase=phase, module=name, point=what, bytes=by_kind(snaps[0][-1 if last else 0][cpu])))

    add("forward", root, FORWARD_POINTS[:1])
    for st in layers:
        add("forward", st, FORWARD_POINTS)
    add("forward", root, FORWARD_POINTS[1:])
    add("backward", root, BACKWARD_POINTS[:1])
    for st in reversed(layers):
        add("backward", st, BACKWARD_POINTS)
    add("backward", root, BACKWARD_POINTS[1:])
    out.append(dict(phase="optimizer", module="all", point="after AdamW", bytes=tracker.after_step))
    return out


def by_kind(snapshot: dict[Any, int]) -> dict[str, int]:
    """A tracker snapshot (``_FSDPRefType`` -> bytes) as :data:`KINDS`' names and ``"total"``."""
    out = {name: 0 for name in KINDS.values()}
    for kind, size in snapshot.items():
        name = KINDS.get(getattr(kind, "name", str(kind)))
        if name is not None:
            out[name] += int(size)
    out["total"] = int(snapshot.get("Total", sum(out.values())))
    return out


def _tracked_step(shard: Callable[..., Any], model_cfg: dict[str, Any], batch_size: int, seq_len: int) -> Any:
    """One forward, backward and AdamW step under ``FSDPMemTracker``; the tracker, with ``after_step`` (by kind)."""
    import torch
    import torch.distributed as dist
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    ours = not dist.is_initialized()
    if ours:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the job's CPU workers run (cpu_threads); a fraction of a second per step
    try:
        torch.manual_seed(0)
        model = model_mod.build_random(model_cfg, torch.device("cpu"))
        shard(model, mixed_precision=False)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        seeded = torch.Generator().manual_seed(0)
        ids = torch.randint(0, model.config.vocab_size, (batch_size, seq_len), generator=seeded)
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs((ids,))
        with tracker:
            kernels.causal_lm_loss(model, ids).backward()
            optimizer.step()
            tracker.after_step = by_kind(tracker.get_tracker_snapshot()[torch.device("cpu")])
            optimizer.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(threads)
        if ours:
            dist.destroy_process_group()
    return tracker
